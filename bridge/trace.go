//go:build !windows

package bridge

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// The span of a call on the bridge. The handler runs under it (its ctx
// carries the span), so the dap, sandbox and terminal packages hang their
// spans beneath it. Its attributes are a call's at every hop
// (tracing.CallAttributes, tracing.EndCall) and how it came; never its
// payload or any token.
const (
	callSpanName  = "tether.bridge.call"
	attrTransport = attribute.Key("tether.transport")
)

const tracerName = "github.com/tetherdev/tether/bridge"

// startSpan starts the span of call, received at received over transport,
// and returns ctx carrying it. The span continues call.Traceparent (the
// broker's delivery span, or the traceparent header on the local HTTP
// listener); a malformed one starts a new trace and is logged at debug.
// Without a traceparent, a span already in ctx (an in-process caller's) is
// the parent. When tracing is off it returns ctx and a nil span at the cost
// of one atomic load.
func (d *dispatcher) startSpan(ctx context.Context, call *protocol.ToolCall, received time.Time, transport string, log callLog) (context.Context, trace.Span) {
	if !tracing.On() {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(received),
		trace.WithAttributes(tracing.CallAttributes(d.wsID, call.Endpoint, call.CorrelationID, attrTransport.String(transport))...),
	}
	if call.Traceparent != "" {
		var ok bool
		if ctx, ok = tracing.Continue(ctx, call.Traceparent, "", log.Debug, "call"); !ok {
			opts = append(opts, trace.WithNewRoot())
		}
	}
	return otel.Tracer(tracerName).Start(ctx, callSpanName, opts...)
}

// endSpan records the call's outcome and ends span; a nil span (tracing
// off) is a no-op.
func endSpan(span trace.Span, resp protocol.ToolResponse) {
	tracing.EndCall(span, resp.Success, resp.Error)
}
