package broker

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// The trace of a call at the broker holding its workspace: "tether.deliver",
// a Consumer span from the delivery to the socket to the call's one answer
// (callTable.finish), a child of the traceparent the call arrived with:
// the entry broker's crossing of the bus, or the API's call span when this
// broker took the call itself (Dispatch). The tool_call sent to the client
// carries the deliver span as its traceparent.

var tracer = otel.Tracer("github.com/tetherdev/tether/broker")

// deliverSpan starts the deliver span of call to c's workspace. It returns
// the span (nil when tracing is off) and the traceparent the tool_call
// carries to the client: the span's; with tracing off the call's own,
// passed on unchanged. A traceparent the call brings that is malformed
// (from a bus message) is ignored: the span starts a new trace.
func (c *conn) deliverSpan(call *protocol.ToolCall) (trace.Span, string) {
	if !tracing.On() {
		return nil, call.Traceparent
	}
	ctx, _ := tracing.Extract(context.Background(), call.Traceparent, "")
	_, span := tracer.Start(ctx, "tether.deliver", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.CallAttributes(c.WorkspaceID(), call.Endpoint, call.CorrelationID)...))
	return span, tracing.Format(span.SpanContext())
}
