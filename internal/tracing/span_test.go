package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/tetherdev/tether/internal/otlptest"
)

// capturingExporter keeps what the batcher exports to it.
type capturingExporter struct {
	mu    sync.Mutex
	spans []spanData
}

func (e *capturingExporter) export(_ context.Context, spans []spanData) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans = append(e.spans, spans...)
	return nil
}

func (e *capturingExporter) Shutdown(context.Context) error { return nil }

// twoTracers returns a tracer of the SDK, recording into mem, and a lean
// one exporting into capture, with one sampler and one resource.
func twoTracers(t *testing.T, sampler sdktrace.Sampler) (sdk trace.Tracer, mem *tracetest.InMemoryExporter, lt *leanTracing, capture *capturingExporter) {
	t.Helper()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.37.0", attribute.String("service.name", "tether-broker"))
	mem = tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sampler), sdktrace.WithSyncer(mem))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	capture = &capturingExporter{}
	b := newProcessor(mem, prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}))
	b.exp = capture
	t.Cleanup(func() { _ = b.Shutdown(context.Background()) })
	return tp.Tracer("github.com/tetherdev/tether/broker/api"), mem,
		&leanTracing{sampler: sampler, resource: res, batcher: b, provider: tp}, capture
}

// leanStart starts a span of lt as Tracer's tracer of the same scope does.
func leanStart(lt *leanTracing, ctx context.Context, name string, opts ...trace.SpanStartOption) trace.Span {
	tr := Tracer("github.com/tetherdev/tether/broker/api")
	cfg := trace.NewSpanStartConfig(opts...)
	return lt.start(ctx, &tr.scope, name, &cfg)
}

// decoded is the OTLP request of spans, as a collector decodes it, with
// the span IDs (random) of the n-th span replaced by n, and a root span's
// trace ID too.
func decoded(t *testing.T, spans []spanData) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(appendRequest(nil, spans), &msg); err != nil {
		t.Fatal(err)
	}
	n := byte(0)
	for _, rs := range msg.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				n++
				s.SpanId = []byte{n}
				if len(s.ParentSpanId) == 0 {
					s.TraceId = []byte{n}
				}
			}
		}
	}
	return &msg
}

// theSameSpans does the same to a span of each tracer.
var theSameSpans = []struct {
	name string
	do   func(start func(ctx context.Context, name string, opts ...trace.SpanStartOption) trace.Span)
}{
	{"a call: a child of a caller's, with its attributes, an event and an error", func(start func(context.Context, string, ...trace.SpanStartOption) trace.Span) {
		ctx, _ := Extract(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
		t0 := time.Unix(1_700_000_000, 5)
		s := start(ctx, "tether.call", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(t0),
			trace.WithAttributes(CallAttributes("ws1", "ping", "cid-1", attribute.String("http.route", "/api/v1/workspaces/{id}/calls"))...))
		s.AddEvent("tether.deliver", trace.WithTimestamp(t0.Add(time.Millisecond)))
		s.SetAttributes(Outcome.String("timeout"))
		s.SetStatus(codes.Error, "timeout")
		s.End(trace.WithTimestamp(t0.Add(time.Second)))
		EndCall(s, true, "") // after the end: changes nothing
	}},
	{"a root, its status Ok over Error, an attribute set twice, an invalid one, no kind", func(start func(context.Context, string, ...trace.SpanStartOption) trace.Span) {
		t0 := time.Unix(1_700_000_001, 0)
		s := start(context.Background(), "tether.bus.publish", trace.WithTimestamp(t0),
			trace.WithAttributes(attribute.String("a", "1"), attribute.String("", "invalid"), attribute.Int("b", 2)))
		s.SetAttributes(attribute.String("a", "again"), attribute.Bool("c", true))
		s.SetStatus(codes.Ok, "ignored")
		s.SetStatus(codes.Error, "after ok")
		s.SetName("tether.renamed")
		s.End(trace.WithTimestamp(t0.Add(2 * time.Second)))
	}},
	{"an error recorded, a link, a trace state, a remote unsampled parent's child kept by the sampler", func(start func(context.Context, string, ...trace.SpanStartOption) trace.Span) {
		ctx, _ := Extract(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "vendor=abc")
		t0 := time.Unix(1_700_000_002, 0)
		link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
		s := start(ctx, "tether.deliver", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(t0),
			trace.WithLinks(trace.Link{SpanContext: link, Attributes: []attribute.KeyValue{attribute.Int("l", 1)}}))
		s.RecordError(errors.New("boom"), trace.WithTimestamp(t0.Add(time.Microsecond)))
		s.AddLink(trace.Link{})
		s.End(trace.WithTimestamp(t0.Add(time.Millisecond)))
	}},
	{"more attributes and events than the limits", func(start func(context.Context, string, ...trace.SpanStartOption) trace.Span) {
		t0 := time.Unix(1_700_000_003, 0)
		s := start(context.Background(), "many", trace.WithTimestamp(t0))
		for i := range attributeCountLimit + 5 {
			s.SetAttributes(attribute.Int(fmt.Sprint("k", i), i))
		}
		for i := range eventCountLimit + 3 {
			s.AddEvent(fmt.Sprint("e", i), trace.WithTimestamp(t0.Add(time.Duration(i))))
		}
		s.End(trace.WithTimestamp(t0.Add(time.Second)))
	}},
}

func TestLeanSpansEncodeAsTheSDKsSpans(t *testing.T) {
	for _, c := range theSameSpans {
		t.Run(c.name, func(t *testing.T) {
			sdk, mem, lt, capture := twoTracers(t, sdktrace.AlwaysSample())
			c.do(func(ctx context.Context, name string, opts ...trace.SpanStartOption) trace.Span {
				_, s := sdk.Start(ctx, name, opts...)
				return s
			})
			c.do(func(ctx context.Context, name string, opts ...trace.SpanStartOption) trace.Span {
				return leanStart(lt, ctx, name, opts...)
			})
			if err := lt.batcher.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			var want []spanData
			for _, s := range mem.GetSpans().Snapshots() {
				want = append(want, s)
			}
			if len(want) != 1 || len(capture.spans) != 1 {
				t.Fatalf("%d SDK spans and %d lean spans ended; want 1 of each", len(want), len(capture.spans))
			}
			got, exp := decoded(t, capture.spans), decoded(t, want)
			if !proto.Equal(got, exp) {
				t.Fatalf("the lean span encodes otherwise than the SDK's:\nlean:\n%s\nSDK:\n%s", prototext.Format(got), prototext.Format(exp))
			}
		})
	}
}

func TestLeanSpansAreSampledAsTheSDKsByOTELTracesSampler(t *testing.T) {
	parents := map[string]string{
		"no parent":          "",
		"a sampled parent":   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"an unsampled one":   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"a low trace ID":     "00-00000000000000000000000000000001-00f067aa0ba902b7-00",
		"a high trace ID":    "00-ffffffffffffffffffffffffffffffff-00f067aa0ba902b7-01",
		"random flag, state": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03",
	}
	for _, env := range [][2]string{
		{"", ""}, {"always_on", ""}, {"always_off", ""}, {"traceidratio", "0.5"}, {"traceidratio", ""},
		{"traceidratio", "nonsense"}, {"traceidratio", "2"}, {"parentbased_always_on", ""},
		{"PARENTBASED_ALWAYS_OFF", ""}, {"parentbased_traceidratio", "0.5"}, {"jaeger_remote", ""},
	} {
		t.Run(env[0]+"="+env[1], func(t *testing.T) {
			t.Setenv("OTEL_TRACES_SAMPLER", env[0])
			t.Setenv("OTEL_TRACES_SAMPLER_ARG", env[1])
			sampler, _ := samplerFromEnv()
			// The SDK reading the environment itself, not given the sampler.
			bySDK := sdktrace.NewTracerProvider()
			defer func() { _ = bySDK.Shutdown(context.Background()) }()
			_, _, lt, _ := twoTracers(t, sampler)
			for what, tp := range parents {
				ctx, _ := Extract(context.Background(), tp, map[bool]string{true: "vendor=abc"}[what == "random flag, state"])
				_, want := bySDK.Tracer("x").Start(ctx, "s")
				got := leanStart(lt, ctx, "s")
				w, g := want.SpanContext(), got.SpanContext()
				recording, wantRecording := got.IsRecording(), want.IsRecording()
				got.End()
				want.End()
				if tp == "" && env[1] == "0.5" {
					continue // a ratio's decision on a new trace's random ID
				}
				if g.IsSampled() != w.IsSampled() || recording != wantRecording || g.TraceFlags() != w.TraceFlags() ||
					g.TraceState().String() != w.TraceState().String() || !g.IsValid() || g.IsRemote() {
					t.Errorf("%s: lean span sampled %v, recording %v, flags %v, state %q, valid %v; the SDK's %v, %v, %v, %q",
						what, g.IsSampled(), recording, g.TraceFlags(), g.TraceState(), g.IsValid(),
						w.IsSampled(), wantRecording, w.TraceFlags(), w.TraceState())
				}
				if tp != "" && (g.TraceID() != w.TraceID() || Format(g)[:36] != tp[:36]) {
					t.Errorf("%s: the lean span's trace is %s; want the parent's", what, g.TraceID())
				}
			}
		})
	}
}

// useMemProvider installs (UseProvider) a provider of the SDK that records
// into the returned exporter, for the rest of the test, which also puts
// back the leanTracing the test stores.
func useMemProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	mem := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
	restore := UseProvider(tp)
	t.Cleanup(func() {
		restore()
		_ = tp.Shutdown(context.Background())
	})
	return tp, mem
}

func TestTracerStartsLeanSpansOnlyWhileLeanTracingIsInstalled(t *testing.T) {
	tp, mem := useMemProvider(t)
	tr := Tracer("github.com/tetherdev/tether/broker")
	_, s := tr.Start(context.Background(), "via the SDK")
	s.End()
	if _, lean := s.(*leanSpan); lean || len(mem.GetSpans()) != 1 {
		t.Fatalf("under UseProvider: a %T, %d spans recorded; want the provider's span", s, len(mem.GetSpans()))
	}

	_, _, lt, capture := twoTracers(t, sdktrace.AlwaysSample())
	lean.Store(lt)
	ctx, s := tr.Start(context.Background(), "lean")
	if _, ok := s.(*leanSpan); !ok || trace.SpanFromContext(ctx) != s {
		t.Fatalf("with leanTracing: a %T, in ctx %v; want a leanSpan, in ctx", s, trace.SpanFromContext(ctx) == s)
	}
	_, child := tp.Tracer("sdk").Start(ctx, "an SDK child")
	child.End()
	s.End()
	if err := lt.batcher.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(capture.spans) != 1 || capture.spans[0].InstrumentationScope().Name != "github.com/tetherdev/tether/broker" {
		t.Fatalf("%d lean spans exported; want 1 of scope broker", len(capture.spans))
	}
	if got := mem.GetSpans()[1].Parent; got.SpanID() != s.SpanContext().SpanID() {
		t.Fatalf("the SDK child's parent is %s; want the lean span %s", got.SpanID(), s.SpanContext().SpanID())
	}
}

func BenchmarkLeanSpan(b *testing.B) {
	ctx, _ := Extract(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
	attrs := CallAttributes("ws1", "ping", "cid-1")
	run := func(b *testing.B, tr trace.Tracer, flush func()) {
		b.ReportAllocs()
		for i := range b.N {
			_, s := tr.Start(ctx, "tether.call", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			s.AddEvent("tether.deliver")
			EndCall(s, true, "")
			if i%512 == 511 {
				flush()
			}
		}
	}
	b.Run("sdk", func(b *testing.B) {
		p := newProcessor(tracetest.NewNoopExporter(), prometheus.NewCounter(prometheus.CounterOpts{Name: "d"}))
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(p))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		run(b, tp.Tracer("x"), func() { _ = p.ForceFlush(context.Background()) })
	})
	b.Run("lean", func(b *testing.B) {
		p := newProcessor(tracetest.NewNoopExporter(), prometheus.NewCounter(prometheus.CounterOpts{Name: "d"}))
		p.exp = &capturingExporter{}
		defer func() { _ = p.Shutdown(context.Background()) }()
		lt := &leanTracing{sampler: sdktrace.AlwaysSample(), resource: resource.Empty(), batcher: p}
		tr := Tracer("x")
		run(b, leanOnly{tr, lt}, func() {
			_ = p.ForceFlush(context.Background())
			p.exp.(*capturingExporter).spans = nil
		})
	})
}

// leanOnly starts t's spans with lt, whatever is installed.
type leanOnly struct {
	*HotTracer
	lt *leanTracing
}

func (l leanOnly) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	s := l.lt.start(ctx, &l.scope, name, &cfg)
	return trace.ContextWithSpan(ctx, s), s
}

func TestSetupStartsLeanSpansWithTheResourceAndScopeOfTheSDKs(t *testing.T) {
	// TETHER_TUNING=no-leanspans is not here: it is read once per process
	// (CI runs the e2e suite with every piece off).
	for _, c := range []struct {
		name, limit string
		lean        bool
	}{
		{"lean", "", true},
		{"a span limit set: the SDK's spans", "64", false},
		{"a span limit set to the SDK's default: lean", "128", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rcv := otlptest.Start(t)
			before := goleak.IgnoreCurrent()
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
			t.Setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", c.limit)
			tr, err := Setup(context.Background(), Service{Name: "tether-broker", InstanceID: "b1", Version: "v9"}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			ctx, _ := Extract(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
			_, s := Tracer("github.com/tetherdev/tether/broker/api").Start(ctx, "tether.call", trace.WithSpanKind(trace.SpanKindServer))
			if _, isLean := s.(*leanSpan); isLean != c.lean {
				t.Errorf("a %T; want lean %v", s, c.lean)
			}
			s.End()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := goleak.Find(before); err != nil {
				t.Errorf("Shutdown left a goroutine of Setup's: %v", err)
			}
			reqs := rcv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d exports; want 1", len(reqs))
			}
			rs := reqs[0].ResourceSpans[0]
			res := map[string]string{}
			for _, kv := range rs.Resource.Attributes {
				res[kv.Key] = kv.Value.GetStringValue()
			}
			sp := rs.ScopeSpans[0]
			if res["service.name"] != "tether-broker" || res["service.instance.id"] != "b1" || res["service.version"] != "v9" ||
				sp.Scope.GetName() != "github.com/tetherdev/tether/broker/api" || len(sp.Spans) != 1 || sp.Spans[0].Name != "tether.call" {
				t.Fatalf("exported %s", prototext.Format(reqs[0]))
			}
		})
	}
}

func TestBeginStartsTheSpanStartDoesWithThatKindAndThoseAttributes(t *testing.T) {
	_, mem := useMemProvider(t)
	_, _, lt, capture := twoTracers(t, sdktrace.AlwaysSample())
	ctx, _ := Extract(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "")
	attrs := CallAttributes("ws1", "ping", "cid-1")
	tr := Tracer("github.com/tetherdev/tether/broker")
	for _, withLean := range []bool{false, true} {
		if withLean {
			lean.Store(lt)
		}
		begun := tr.Begin(ctx, "s", trace.SpanKindConsumer, attrs...)
		_, started := tr.Start(ctx, "s", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
		begun.End()
		started.End()
	}
	if err := lt.batcher.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sdkSpans []spanData
	for _, s := range mem.GetSpans().Snapshots() {
		sdkSpans = append(sdkSpans, s)
	}
	for what, pair := range map[string][]spanData{"the SDK's": sdkSpans, "lean": capture.spans} {
		if len(pair) != 2 {
			t.Fatalf("%s: %d spans; want 2", what, len(pair))
		}
		b, s := pair[0], pair[1]
		if b.Name() != s.Name() || b.SpanKind() != s.SpanKind() || !b.Parent().Equal(s.Parent()) ||
			fmt.Sprint(b.Attributes()) != fmt.Sprint(s.Attributes()) || b.SpanContext().TraceID() != s.SpanContext().TraceID() ||
			b.SpanContext().TraceFlags() != s.SpanContext().TraceFlags() || b.InstrumentationScope() != s.InstrumentationScope() {
			t.Errorf("%s: Begin's span %s %v %v, Start's %s %v %v", what, b.Name(), b.SpanKind(), b.Attributes(), s.Name(), s.SpanKind(), s.Attributes())
		}
	}
}
