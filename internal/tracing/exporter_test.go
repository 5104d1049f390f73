//go:build !windows

package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/tetherdev/tether/internal/leakcheck"
	"github.com/tetherdev/tether/internal/otlptest"
)

// sampleSpans are spans with every part of the OTLP span: attributes of
// every type (short and long), events, a status of each code, links, each
// kind, a remote and a local parent, trace state, dropped counts, two
// resources and several instrumentation scopes, interleaved.
func sampleSpans(t *testing.T) []sdktrace.ReadOnlySpan {
	t.Helper()
	res1 := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.37.0",
		attribute.String("service.name", "tether-broker"), attribute.String("service.instance.id", "b1"))
	res2 := resource.NewSchemaless(attribute.String("service.name", "tether-bridge"), attribute.Int64("n", 7))
	scopes := []instrumentation.Scope{
		{Name: "github.com/tetherdev/tether/broker/api"},
		{Name: "github.com/tetherdev/tether/broker", Version: "v1", SchemaURL: "https://example.test/s",
			Attributes: attribute.NewSet(attribute.Bool("x", true))},
		{},
	}
	ts, err := trace.ParseTraceState("vendor=abc,other=1")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("l", 300)
	huge := strings.Repeat("h", 20000)
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	start := time.Unix(1_700_000_000, 123456789)
	var stubs tracetest.SpanStubs
	kinds := []trace.SpanKind{trace.SpanKindUnspecified, trace.SpanKindInternal, trace.SpanKindServer, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer}
	statuses := []sdktrace.Status{{}, {Code: codes.Ok}, {Code: codes.Error, Description: "timeout"}}
	for i := range 12 {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, byte(i)}, TraceFlags: trace.FlagsSampled})
		if i%3 == 0 {
			sc = sc.WithTraceState(ts)
		}
		parent := trace.SpanContext{}
		if i%4 == 1 {
			parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{2, byte(i)}, TraceFlags: trace.FlagsSampled, Remote: true})
		} else if i%4 == 2 {
			parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{3, byte(i)}})
		}
		res := res1
		if i%5 == 4 {
			res = res2
		}
		stubs = append(stubs, tracetest.SpanStub{
			Name:        "tether.span." + strings.Repeat("n", i),
			SpanContext: sc,
			Parent:      parent,
			SpanKind:    kinds[i%len(kinds)],
			StartTime:   start.Add(time.Duration(i) * time.Millisecond),
			EndTime:     start.Add(time.Duration(i+1) * time.Millisecond),
			Attributes: []attribute.KeyValue{
				attribute.String("s", "v"), attribute.String("empty", ""), attribute.String("long", long),
				attribute.Int("i", -i), attribute.Int64("zero", 0), attribute.Bool("f", false), attribute.Bool("t", true),
				attribute.Float64("pi", 3.14159), attribute.StringSlice("ss", []string{"a", "", long}),
				attribute.IntSlice("is", []int{1, -2, 0}), attribute.BoolSlice("bs", []bool{true, false}),
				attribute.Float64Slice("fs", []float64{0, -1.5}),
			},
			Events: []sdktrace.Event{
				{Name: "ev", Time: start.Add(time.Microsecond), Attributes: []attribute.KeyValue{attribute.String("k", huge)}, DroppedAttributeCount: i},
				{Name: "bare", Time: start},
			},
			Links: []sdktrace.Link{
				{SpanContext: parent.WithTraceState(ts), Attributes: []attribute.KeyValue{attribute.Int("l", i)}, DroppedAttributeCount: 1},
			},
			Status:               statuses[i%len(statuses)],
			DroppedAttributes:    i % 2,
			DroppedEvents:        i % 3,
			DroppedLinks:         i % 4,
			ChildSpanCount:       i,
			Resource:             res,
			InstrumentationScope: scopes[i%len(scopes)],
		})
	}
	return stubs.Snapshots()
}

// export sends spans through exp and returns the one request rcv got.
func exportTo(t *testing.T, rcv *otlptest.Receiver, exp sdktrace.SpanExporter, spans []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	before := len(rcv.Requests())
	if err := exp.ExportSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := rcv.Requests()
	if len(reqs) != before+1 {
		t.Fatalf("%d requests received for one export; want 1", len(reqs)-before)
	}
	return reqs[before]
}

// sortResources orders a request's resource spans by their schema URL and
// first attribute: the official exporter emits them in map order.
func sortResources(r *coltracepb.ExportTraceServiceRequest) {
	rs := r.ResourceSpans
	key := func(i int) string { return rs[i].SchemaUrl + prototext.Format(rs[i].Resource) }
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && key(j) < key(j-1); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func TestLeanExporterEncodesAsTheOfficialOne(t *testing.T) {
	for _, compression := range []string{"none", "gzip"} {
		t.Run(compression, func(t *testing.T) {
			rcv := otlptest.Start(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
			t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=a%20b")
			spans := sampleSpans(t)
			official, err := otlptracehttp.New(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			lean, err := newLeanExporter()
			if err != nil {
				t.Fatal(err)
			}
			want := exportTo(t, rcv, official, spans)
			got := exportTo(t, rcv, lean, spans)
			sortResources(want)
			sortResources(got)
			if len(got.ResourceSpans) != 2 {
				t.Fatalf("%d resource spans; want the sample's 2", len(got.ResourceSpans))
			}
			if !proto.Equal(got, want) {
				t.Fatalf("the lean exporter's request differs from the official exporter's:\nlean:\n%s\nofficial:\n%s",
					prototext.Format(got), prototext.Format(want))
			}
		})
	}
}

func TestLeanEncodingRoundTripsThroughTheOfficialDecoder(t *testing.T) {
	// Lengths on each side of the one- and two-byte varint boundaries of
	// closeField's shift.
	for _, n := range []int{0, 1, 100, 127, 128, 129, 16383, 16384, 70000} {
		v := strings.Repeat("x", n)
		stub := tracetest.SpanStub{
			Name: "s",
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
				TraceFlags: trace.FlagsSampled}),
			StartTime:  time.Unix(1, 0),
			EndTime:    time.Unix(2, 0),
			Attributes: []attribute.KeyValue{attribute.String("v", v), attribute.StringSlice("vs", []string{v, v})},
			Resource:   resource.NewSchemaless(attribute.String("service.name", "x")),
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(appendRequest(nil, asSpanData(tracetest.SpanStubs{stub}.Snapshots())), &msg); err != nil {
			t.Fatalf("%d-byte value: %v", n, err)
		}
		s := msg.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0]
		attrs := s.GetAttributes()
		if s.GetName() != "s" || len(attrs) != 2 || attrs[0].GetValue().GetStringValue() != v ||
			len(attrs[1].GetValue().GetArrayValue().GetValues()) != 2 || attrs[1].GetValue().GetArrayValue().GetValues()[1].GetStringValue() != v ||
			s.GetEndTimeUnixNano() != 2e9 {
			t.Fatalf("%d-byte value: decoded %s", n, prototext.Format(s))
		}
	}
}

func TestLeanExporterRetriesWhatTheEndpointAsksToBeRetriedAndNothingElse(t *testing.T) {
	var calls atomic.Int64
	code := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(code)
		}
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	spans := sampleSpans(t)[:1]
	for _, c := range []struct {
		code    int
		ok      bool
		calls   int64
		atLeast time.Duration
	}{
		{http.StatusServiceUnavailable, true, 2, time.Second},
		{http.StatusTooManyRequests, true, 2, time.Second},
		{http.StatusBadRequest, false, 1, 0},
	} {
		code = c.code
		calls.Store(0)
		exp, err := newLeanExporter()
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		err = exp.ExportSpans(context.Background(), spans)
		took := time.Since(began)
		if (err == nil) != c.ok || calls.Load() != c.calls || took < c.atLeast || took > c.atLeast+3*time.Second {
			t.Errorf("first answer %d: err %v after %d requests in %v; want ok %v after %d in %v to %v", c.code, err, calls.Load(), took, c.ok, c.calls, c.atLeast, c.atLeast+3*time.Second)
		}
		_ = exp.Shutdown(context.Background())
	}
}

func TestLeanExporterConfigurationErrorsNameTheVariable(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://x/v1/traces"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "novalue"},
		{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s"},
		{"OTEL_EXPORTER_OTLP_COMPRESSION", "zstd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
			t.Setenv(c.name, c.value)
			if _, err := newLeanExporter(); err == nil || !strings.Contains(err.Error(), c.name) {
				t.Fatalf("%s=%q: error %v; want one naming the variable", c.name, c.value, err)
			}
		})
	}
}

func TestLeanExporterLeavesCertificatesToTheOfficialOne(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:4318")
	if !leanCovers() {
		t.Fatal("no certificate set, and the lean exporter does not cover it")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "/etc/ssl/ca.pem")
	if leanCovers() {
		t.Fatal("a CA certificate set, and the lean exporter claims it")
	}
}

func TestLeanExporterLeavesNoGoroutineOrDescriptorAfterShutdown(t *testing.T) {
	base := leakcheck.Begin()
	opts := goleak.IgnoreCurrent()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	exp, err := newLeanExporter()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := exp.ExportSpans(context.Background(), sampleSpans(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(context.Background(), sampleSpans(t)); err == nil {
		t.Error("an export after Shutdown succeeded")
	}
	srv.Close()
	if err := base.Check(leakcheck.Wait, opts); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAppendRequest encodes a batch as the broker exports it: 512
// call spans of one resource and scope, each with the call's attributes
// and the delivery event.
func BenchmarkAppendRequest(b *testing.B) {
	res := resource.NewSchemaless(attribute.String("service.name", "tether-broker"), attribute.String("service.instance.id", "b1"))
	var stubs tracetest.SpanStubs
	for i := range 512 {
		stubs = append(stubs, tracetest.SpanStub{
			Name: "tether.call",
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, byte(i)}, SpanID: trace.SpanID{2, byte(i)},
				TraceFlags: trace.FlagsSampled}),
			Parent:    trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, byte(i)}, SpanID: trace.SpanID{3}, Remote: true}),
			SpanKind:  trace.SpanKindServer,
			StartTime: time.Unix(1, 0),
			EndTime:   time.Unix(2, 0),
			Attributes: append(CallAttributes("ws-bench", "/api/ping", "4bf92f35-77b3-4da6-a3ce-929d0e0e4736"),
				attribute.String("http.route", "/api/v1/workspaces/{id}/calls"), Outcome.String("success")),
			Events:               []sdktrace.Event{{Name: "tether.deliver", Time: time.Unix(1, 5)}},
			Resource:             res,
			InstrumentationScope: instrumentation.Scope{Name: "github.com/tetherdev/tether/broker/api"},
		})
	}
	spans := asSpanData(stubs.Snapshots())
	var buf []byte
	for b.Loop() {
		buf = appendRequest(buf[:0], spans)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	b.ReportMetric(float64(len(buf))/float64(len(spans)), "bytes/span")
}

func TestLeanExporterSendsTheConfiguredHeadersTimeoutAndCompression(t *testing.T) {
	type seen struct{ path, ctype, encoding, tenant, auth string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Content-Encoding"), r.Header.Get("X-Tenant"), r.Header.Get("Authorization")}
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://unused.invalid")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/custom/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=ignored")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-tenant=a%20b, Authorization=Bearer%20t")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1234")
	exp, err := newLeanExporter()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()
	if exp.timeout != 1234*time.Millisecond {
		t.Errorf("timeout %v from OTEL_EXPORTER_OTLP_TIMEOUT=1234; want 1.234s", exp.timeout)
	}
	if err := exp.ExportSpans(context.Background(), sampleSpans(t)); err != nil {
		t.Fatal(err)
	}
	want := seen{"/custom/traces", "application/x-protobuf", "gzip", "a b", "Bearer t"}
	if s := <-got; s != want {
		t.Fatalf("request %+v; want %+v (the traces-specific variables win)", s, want)
	}
}
