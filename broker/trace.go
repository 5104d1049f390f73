package broker

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// The trace of a call at the broker holding its workspace: "tether.deliver",
// a Consumer span from the delivery to the socket to the call's one answer
// (callTable.finish), a child of the traceparent the call arrived with:
// the entry broker's crossing of the bus, or the submit's span for an
// async call. The tool_call sent to the client carries the deliver span as
// its traceparent. A synchronous call this broker took itself (Dispatch)
// has no deliver span: its delivery is the event "tether.deliver" on the
// API's call span, which the tool_call carries on; a second span of the
// same call in the same process cost as much again as the first
// (BenchmarkTracingCost, e2e/bench: on/off x1.42 with it, x1.19 without,
// medians of 5 runs).
var tracer = tracing.Tracer("github.com/tetherdev/tether/broker")

// deliverEvent is the event on a local call's span marking its delivery.
const deliverEvent = "tether.deliver"

// deliverSpan starts the deliver span of call to c's workspace. It returns
// the span (nil when tracing is off, or when callSpan, the call's span in
// this process, takes the delivery as an event) and the traceparent the
// tool_call carries to the client: the span's; otherwise the call's own,
// passed on unchanged. A traceparent the call brings that is malformed
// (from a bus message) is ignored: the span starts a new trace.
func (c *conn) deliverSpan(call *protocol.ToolCall, callSpan trace.Span) (trace.Span, string) {
	if !tracing.On() {
		return nil, call.Traceparent
	}
	if callSpan != nil {
		callSpan.AddEvent(deliverEvent) // a no-op if it does not record
		return nil, call.Traceparent
	}
	ctx, _ := tracing.Extract(context.Background(), call.Traceparent, "")
	span := tracer.Begin(ctx, "tether.deliver", trace.SpanKindConsumer,
		tracing.CallAttributes(c.WorkspaceID(), call.Endpoint, call.CorrelationID)...)
	return span, tracing.Format(span.SpanContext())
}
