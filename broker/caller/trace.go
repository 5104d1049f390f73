package caller

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/internal/tracing"
)

// A call carries the trace context of the span in its ctx: HTTP sends it as
// the traceparent (and tracestate) header, BusCaller in the bus message's
// traceparent, behind a span of its own for the crossing of the bus. A ctx
// without a span context sends none, and costs nothing. With no tracer
// provider installed (otel's default, or a broker with tracing off), the
// span in ctx is passed on unchanged: a participant that does not trace
// forwards the caller's context.

var tracer = tracing.Tracer("github.com/tetherdev/tether/broker/caller")

// injectTrace sets the trace context headers of the span in ctx on h.
func injectTrace(ctx context.Context, h propagation.HeaderCarrier) {
	propagation.TraceContext{}.Inject(ctx, h)
}

// publishSpan starts "tether.bus.publish", the Producer span of a call's
// crossing of the bus from publish to answer, when ctx carries a span
// context; it returns the span (nil when none) and the traceparent the
// bus message carries: the new span's, or with no tracer provider the one
// in ctx.
func publishSpan(ctx context.Context, req *Request, cid string) (trace.Span, string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil, ""
	}
	var attrs []attribute.KeyValue
	if tracing.On() { // the attributes at the start: one SetAttributes, not two
		attrs = tracing.CallAttributes(req.WorkspaceID, req.Endpoint, cid)
	}
	span := tracer.Begin(ctx, "tether.bus.publish", trace.SpanKindProducer, attrs...)
	return span, tracing.Format(span.SpanContext())
}
