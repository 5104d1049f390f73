package tracing

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// leanTracing makes the spans of Tracer's tracers leanSpans, which end
// straight into the batcher, instead of the SDK's. Setup installs it when
// the lean exporter sends the spans and no OTEL_*_LIMIT variable changes
// the SDK's span limits, unless TETHER_TUNING=no-leanspans; otherwise
// those tracers start the SDK's spans, as otel.Tracer's do.
//
// With it (and parseTraceparent, HotTracer.Begin), the broker's CPU per
// call traced is x1.07-x1.19 its CPU untraced, x1.10 the median of five
// medians of 7 runs (x1.13 over the 35 runs), against x1.12-x1.20, x1.19
// (x1.18) with the SDK's spans and propagator (BenchmarkTracingCost,
// e2e/bench, 2026-12-05, on a loaded 2-CPU machine; the SDK's measured
// with TETHER_TUNING=no-leanspans and with the build before). Under perf,
// tracing's own functions went from ~13% of the traced broker's CPU to
// ~8.6%.
type leanTracing struct {
	sampler  sdktrace.Sampler // the SDK provider's, from samplerFromEnv
	resource *resource.Resource
	batcher  *batcher
	provider trace.TracerProvider // the SDK's, which Setup installed
}

// lean is the installed leanTracing, or nil.
var lean atomic.Pointer[leanTracing]

// Tracer returns the tracer named scope (an import path) for spans on a
// call's hot path: leanSpans while leanTracing is installed, else the
// global provider's spans, as otel.Tracer(scope) gives them (a test's
// UseProvider, tracing off). Spans of either kind are children of either
// kind's in a context.
func Tracer(scope string) *HotTracer {
	return &HotTracer{scope: instrumentation.Scope{Name: scope}, sdk: otel.Tracer(scope)}
}

// HotTracer is a trace.Tracer whose spans are leanSpans while leanTracing
// is installed (Tracer). Its methods may be called concurrently.
type HotTracer struct {
	embedded.Tracer
	scope instrumentation.Scope // as the SDK's tracer of otel.Tracer(scope) has it
	sdk   trace.Tracer
}

// Start implements trace.Tracer.
func (t *HotTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	lt := lean.Load()
	if lt == nil {
		return t.sdk.Start(ctx, name, opts...)
	}
	cfg := trace.NewSpanStartConfig(opts...)
	s := lt.start(ctx, &t.scope, name, &cfg)
	return trace.ContextWithSpan(ctx, s), s
}

// Begin is Start for a span of kind with attrs, beneath the span context
// in ctx, without the options and the returned context, which the
// broker's call path does not use: with lean spans, the options' config
// and the context were ~1% of a traced broker's CPU (perf under
// BenchmarkTracingCost). attrs is not kept.
func (t *HotTracer) Begin(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) trace.Span {
	lt := lean.Load()
	if lt == nil {
		_, s := t.sdk.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
		return s
	}
	var cfg trace.SpanConfig
	return lt.begin(ctx, &t.scope, name, kind, attrs, &cfg)
}

// start starts a span as the SDK's tracer starts one: the parent is the
// span context in ctx (none with WithNewRoot), the trace ID the parent's
// or a new one, the span ID always new, and the sampler decides whether
// it records and is sampled, and its trace state.
func (lt *leanTracing) start(ctx context.Context, scope *instrumentation.Scope, name string, cfg *trace.SpanConfig) *leanSpan {
	return lt.begin(ctx, scope, name, cfg.SpanKind(), cfg.Attributes(), cfg)
}

// begin is start with the kind and the attributes apart from cfg, which
// gives the rest (Begin passes a zero one).
func (lt *leanTracing) begin(ctx context.Context, scope *instrumentation.Scope, name string, kind trace.SpanKind, attrs []attribute.KeyValue, cfg *trace.SpanConfig) *leanSpan {
	var psc trace.SpanContext
	if cfg.NewRoot() {
		ctx = trace.ContextWithSpanContext(ctx, psc)
	} else {
		psc = trace.SpanContextFromContext(ctx)
	}
	tid := psc.TraceID()
	if !tid.IsValid() {
		tid = newTraceID()
	}
	sr := lt.sampler.ShouldSample(sdktrace.SamplingParameters{
		ParentContext: ctx,
		TraceID:       tid,
		Name:          name,
		Kind:          kind,
		Attributes:    attrs,
		Links:         cfg.Links(),
	})
	flags := psc.TraceFlags() &^ trace.FlagsSampled
	if sr.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
	}
	s := &leanSpan{
		lt:     lt,
		scope:  scope,
		parent: psc,
		sc: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: newSpanID(), TraceFlags: flags, TraceState: sr.Tracestate,
		}),
		kind:      trace.ValidateSpanKind(kind),
		name:      name,
		recording: sr.Decision != sdktrace.Drop,
	}
	if !s.recording {
		return s
	}
	s.start = cfg.Timestamp()
	if s.start.IsZero() {
		s.start = time.Now()
	}
	s.attrs = s.attrBuf[:0]
	for _, l := range cfg.Links() {
		s.addLink(l)
	}
	s.setAttributes(sr.Attributes)
	s.setAttributes(attrs)
	return s
}

// newTraceID is a random trace ID, never the invalid zero one. The SDK's
// generator draws from one math/rand source behind a mutex; math/rand/v2's
// is per thread.
func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		a, b := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			id[i], id[8+i] = byte(a>>(56-8*i)), byte(b>>(56-8*i))
		}
	}
	return id
}

// newSpanID is a random span ID, never the invalid zero one.
func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		a := rand.Uint64()
		for i := range 8 {
			id[i] = byte(a >> (56 - 8*i))
		}
	}
	return id
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG ask for, read as the SDK reads them: always_on,
// always_off, traceidratio, parentbased_always_on (the default),
// parentbased_always_off, parentbased_traceidratio, the ratio 1.0 when
// the argument is missing or not one in [0, 1]. Setup gives it to the
// SDK's provider and to leanTracing, so both sample alike. The error
// names what is wrong; the sampler is then the SDK's fallback.
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (sdktrace.Sampler, error) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1.0), nil
		}
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || v < 0 || v > 1 {
			return sdktrace.TraceIDRatioBased(1.0), errors.New("OTEL_TRACES_SAMPLER_ARG=" + strconv.Quote(arg) + ": want a ratio from 0 to 1; sampling with 1")
		}
		return sdktrace.TraceIDRatioBased(v), nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return ratio()
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		s, err := ratio()
		return sdktrace.ParentBased(s), err
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample()), errors.New("OTEL_TRACES_SAMPLER=" + strconv.Quote(name) + ": not a sampler tether carries; sampling with parentbased_always_on")
}
