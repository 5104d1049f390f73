// Package tracing sets up OpenTelemetry tracing for a tether process from
// the standard OTEL_* environment variables, and carries a trace across the
// hops tether owns as a W3C traceparent string (an HTTP header, a field of
// tool_call on the bus and on the socket).
//
// Tracing is on when an OTLP endpoint is named (OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), OTEL_SDK_DISABLED is not "true"
// and OTEL_TRACES_EXPORTER is not "none". Spans then go to that endpoint
// over OTLP/HTTP through a batch processor with a bounded queue (OTEL_BSP_*),
// sampled by OTEL_TRACES_SAMPLER (default parentbased_always_on). When it is
// off, the global tracer provider stays OpenTelemetry's no-op one and code
// on a hot path asks On first, so an untraced call pays one atomic load.
//
// Packages start spans with otel.Tracer(their import path): Setup installs
// the provider globally, so the dap, sandbox and terminal packages need no
// handle threaded to them. The broker's spans of a call, started on every
// traced call, come from Tracer instead: tether's own lean spans
// (leanTracing), which the SDK's spans and the lean exporter's encoding
// take as they are.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/internal/tuning"
)

// on is true once Setup has installed a real tracer provider.
var on atomic.Bool

// On reports whether this process exports traces. Code that would build
// span attributes or parse a traceparent on every call asks this first.
func On() bool { return on.Load() }

// Service names the process in its spans' resource.
type Service struct {
	// Name is service.name unless OTEL_SERVICE_NAME is set:
	// "tether-broker" or "tether-bridge".
	Name string
	// InstanceID is service.instance.id: the broker's --instance-id; the
	// bridge's workspace and host.
	InstanceID string
	// Version is service.version, the release version.
	Version string
}

// Tracing is the set-up tracing of a process. The zero value (and the one
// Setup returns when tracing is off) does nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider
	dropped  prometheus.Counter
}

// Configured reports whether the environment asks for tracing.
func Configured() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if e := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); e != "" && !strings.EqualFold(e, "otlp") {
		return false // "none", or an exporter tether does not carry
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the global tracer provider and propagator when the
// environment asks for tracing (Configured); otherwise it returns a
// Tracing that does nothing. Errors name what in the environment is wrong.
func Setup(ctx context.Context, svc Service, log zerolog.Logger) (*Tracing, error) {
	t := &Tracing{dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tether_trace_spans_dropped_total",
		Help: "Spans that did not reach the OTLP endpoint: it failed or was unreachable, or the export queue (OTEL_BSP_MAX_QUEUE_SIZE) was full.",
	})}
	if !Configured() {
		return t, nil
	}
	if e := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); e != "" && e != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: tether exports traces over OTLP/HTTP only (http/protobuf)", e)
	}
	exp, err := newExporter(ctx)
	if err != nil {
		return nil, err
	}
	kv := []attribute.KeyValue{semconv.ServiceName(svc.Name), semconv.ServiceVersion(svc.Version)}
	if svc.InstanceID != "" {
		kv = append(kv, semconv.ServiceInstanceID(svc.InstanceID))
	}
	// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override tether's own names.
	attrs := []resource.Option{resource.WithAttributes(kv...), resource.WithFromEnv()}
	res, err := resource.New(ctx, attrs...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("reading OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	sampler, err := samplerFromEnv()
	if err != nil {
		log.Warn().Err(err).Msg("tracing")
	}
	proc := newProcessor(exp, t.dropped)
	t.provider = sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
		sdktrace.WithSpanProcessor(proc),
	)
	otel.SetTracerProvider(t.provider)
	if _, ok := exp.(*leanExporter); ok && sdktrace.NewSpanLimits() == leanLimits && tuning.On(tuning.LeanSpans) {
		lean.Store(&leanTracing{sampler: sampler, resource: res, batcher: proc, provider: t.provider})
	}
	otel.SetTextMapPropagator(propagation.TraceContext{})
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Debug().Err(err).Msg("tracing")
	}))
	on.Store(true)
	log.Info().Str("service", svc.Name).Msg("tracing on: spans go to the OTLP endpoint in OTEL_EXPORTER_OTLP_*")
	return t, nil
}

// newExporter returns the lean exporter, or the official one for a
// configuration the lean one does not cover (leanCovers).
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	if leanCovers() {
		return newLeanExporter()
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("setting up the OTLP trace exporter from OTEL_EXPORTER_OTLP_*: %w", err)
	}
	return exp, nil
}

// Collectors returns the metrics of tracing for /metrics.
func (t *Tracing) Collectors() []prometheus.Collector {
	if t == nil || t.dropped == nil {
		return nil
	}
	return []prometheus.Collector{t.dropped}
}

// Shutdown exports the spans still queued, within ctx, and stops tracing.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	on.Store(false)
	lean.Store(nil)
	return t.provider.Shutdown(ctx)
}

// Extract returns ctx carrying the remote span context of traceparent (and
// tracestate, which may be empty). ok is false when traceparent is empty or
// malformed: ctx is then returned as it was, and a span started from it
// begins a new trace.
func Extract(ctx context.Context, traceparent, tracestate string) (_ context.Context, ok bool) {
	if traceparent == "" {
		return ctx, false
	}
	if tracestate == "" && ownParse() {
		if sc, ok, handled := parseTraceparent(traceparent); handled {
			if !ok {
				return ctx, false
			}
			return trace.ContextWithRemoteSpanContext(ctx, sc), true
		}
	}
	out := propagation.TraceContext{}.Extract(ctx, &headers{traceparent, tracestate})
	if !trace.SpanContextFromContext(out).IsRemote() {
		return ctx, false
	}
	return out, true
}

// Continue is Extract for a traceparent that came from outside (a
// caller's header, an MCP request's _meta, a tool_call): a malformed one is
// ignored and logged at debug on log, with its length but never its value,
// which may hold anything; what is started from ctx then begins a new
// trace. debug gives the caller's debug event (nil when that level is
// off); what names the thing that starts ("call", "tool call").
func Continue(ctx context.Context, traceparent, tracestate string, debug func() *zerolog.Event, what string) (_ context.Context, ok bool) {
	out, ok := Extract(ctx, traceparent, tracestate)
	if !ok && traceparent != "" {
		debug().Int("traceparent_len", len(traceparent)).Msgf("malformed traceparent ignored; the %s starts a new trace", what)
	}
	return out, ok
}

// headers carries a traceparent and a tracestate to the propagator without
// a map: Extract runs on every traced call (BenchmarkExtract).
type headers struct{ traceparent, tracestate string }

func (h *headers) Get(key string) string {
	switch key {
	case "traceparent":
		return h.traceparent
	case "tracestate":
		return h.tracestate
	}
	return ""
}

func (h *headers) Set(string, string) {}

func (h *headers) Keys() []string { return []string{"traceparent", "tracestate"} }

// Traceparent returns the W3C traceparent of the span in ctx, or "" when
// ctx carries no valid span context (tracing off, or no span started).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}
