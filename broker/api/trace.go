package api

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/google/uuid"

	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// The trace of a call at the broker it enters (docs/design.md, Tracing):
// a Server span "tether.call" from the request to the answer, continuing
// the caller's traceparent header (HTTP API) or the trace context in the
// request's context (the MCP endpoint). The span is the call's trace
// context from then on: begin gives the call its traceparent (a holder of
// this broker continues from it), viaBus hands it to the bus caller in the
// context, end ends it with the outcome.

var tracer = tracing.Tracer("github.com/tetherdev/tether/broker/api")

// HTTP routes named on the call spans (http.route).
const (
	routeCallsPath = "/api/v1/workspaces/{id}/calls"
	routeMCPPath   = "/api/v1/workspaces/{id}/mcp"
)

// callSpan begins the trace of a call entering by route, continuing
// traceparent (and tracestate), or when that is empty the span context in
// parent. A synchronous call's span is named at its start: req, the call to
// ws, gets its correlation id here if it has none, and every attribute is
// set in one slice (one SetAttributes per span is what it costs,
// BenchmarkTracingCost); an async submit passes req nil and names its span
// itself, once the store gave the call its id. It returns nil, having done
// nothing, when tracing is off and the
// call brings no trace context: the untraced path pays one atomic load and
// a look at the header. With tracing off a valid traceparent is kept, in a
// span that records nothing, so that the call passes it on unchanged (a
// participant that does not trace forwards the context, W3C Trace
// Context). A malformed traceparent is ignored, logged at debug: a new
// trace starts.
func (a *API) callSpan(parent context.Context, traceparent, tracestate, route, ws string, req *protocol.ToolCall) trace.Span {
	on := tracing.On()
	ctx, _ := tracing.Continue(parent, traceparent, tracestate, a.log.Debug, "call")
	if !on {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return nil
		}
		return trace.SpanFromContext(ctx) // records nothing; carries the caller's context
	}
	var attrs []attribute.KeyValue
	if req != nil {
		if req.CorrelationID == "" {
			req.CorrelationID = uuid.NewString()
		}
		attrs = tracing.CallAttributes(ws, req.Endpoint, req.CorrelationID, semconv.HTTPRoute(route))
	} else {
		attrs = []attribute.KeyValue{semconv.HTTPRoute(route)}
	}
	return tracer.Begin(ctx, "tether.call", trace.SpanKindServer, attrs...)
}

// traceBegun gives req the traceparent it carries on: its span's (which
// callSpan named). span may be nil.
func traceBegun(span trace.Span, req *protocol.ToolCall) {
	if span == nil {
		return
	}
	req.Traceparent = tracing.Format(span.SpanContext())
}

// traceEnd ends a call's span with its answer. span may be nil.
func traceEnd(span trace.Span, resp *protocol.ToolResponse) {
	tracing.EndCall(span, resp.Success, resp.Error)
}

// withSpan is ctx carrying span (nil: ctx as it is), for the bus caller.
func withSpan(ctx context.Context, span trace.Span) context.Context {
	if span == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, span)
}

// syncCall is req for callSpan when the call is synchronous (neither the
// request nor its Prefer header asks for async), else nil.
func syncCall(req *protocol.ToolCall, preferAsync bool) *protocol.ToolCall {
	if preferAsync || req.Async {
		return nil
	}
	return req
}
