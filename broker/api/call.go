package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

// A call of the API, from its request to its answer. Each entry (the call
// server, net/http, the MCP tools) takes the same steps: callAuthorized,
// acceptCall, then begin for a synchronous call, whose one answer, however
// it comes (from a connection of this broker, from the bus, or the
// guard's), passes through end before it is written (finish).

// handleCall answers POST /api/v1/workspaces/{id}/calls through net/http.
func (a *API) handleCall(c *gin.Context) {
	start := time.Now()
	ws := c.Param("id")
	w := a.noted(c, audit.Call, ws, "", start)
	if !a.callAuthorized(w, ws, bearer(c.Request)) {
		return
	}
	// The body holds the payload plus a little envelope.
	limit := int64(a.cfg.MaxPayload)
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, limit+1))
	if err != nil {
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "reading body: "+err.Error())
		return
	}
	req, prefer, ok := a.acceptCall(w, body, c.GetHeader("Idempotency-Key"), c.Request.Header.Values("Prefer"))
	if !ok {
		return
	}
	span := a.callSpan(c.Request.Context(), c.GetHeader("traceparent"), c.GetHeader("tracestate"), routeCallsPath, ws, syncCall(&req, prefer.async))
	if prefer.async || req.Async {
		a.submit(c.Request.Context(), w, ws, req, prefer, span)
		return
	}
	a.finish(w, start, a.route(c.Request.Context(), ws, req, span))
}

// callAuthorized checks that token may call workspace ws; when it may
// not, it answers w and returns false. Both servers of POST .../calls
// check this before they read the body.
func (a *API) callAuthorized(w writer, ws, token string) bool {
	claims, err := a.auth.Verify(token, auth.RoleCaller, ws)
	notePrincipal(w, claims)
	if err != nil {
		a.metrics.calls.WithLabelValues(protocol.FailureFrom("", err, protocol.CodeUnauthorized).Error).Inc()
		refuse(w, err)
		return false
	}
	return true
}

// acceptCall reads the body of a POST .../calls (at most MaxPayload+1
// bytes of it) with the request's Idempotency-Key and Prefer headers, for
// both servers of the call API. It returns the call and what the request
// prefers; an async call has req.Async or prefer.async set. A request that
// is refused is answered on w, and ok is false.
func (a *API) acceptCall(w writer, body []byte, idemKey string, preferValues []string) (req protocol.ToolCall, prefer preferences, ok bool) {
	if len(body) > a.cfg.MaxPayload {
		a.metrics.calls.WithLabelValues(protocol.CodePayloadTooLarge).Inc()
		apiError(w, http.StatusRequestEntityTooLarge, protocol.CodePayloadTooLarge, "request body over the broker's maxPayload")
		return req, prefer, false
	}
	req, err := decodeCallRequest(body)
	if err != nil {
		a.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "call body: "+err.Error())
		return req, prefer, false
	}
	if len(req.Payload) == 0 || bytes.Equal(req.Payload, []byte("null")) {
		req.Payload = json.RawMessage("{}")
	}
	if err := req.Validate(); err != nil {
		a.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, protocol.FailureFrom("", err, protocol.CodeInvalidRequest).Message)
		return req, prefer, false
	}
	if req.WaitForWorkspaceMS < 0 {
		a.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "wait_for_workspace_ms must not be negative")
		return req, prefer, false
	}
	if idemKey != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != idemKey {
			apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "the Idempotency-Key header and the idempotency_key field differ")
			return req, prefer, false
		}
		req.IdempotencyKey = idemKey
	}
	prefer, err = parsePrefer(preferValues)
	async := req.Async || prefer.async
	if err != nil && async {
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, err.Error())
		return req, prefer, false
	}
	if req.IdempotencyKey != "" && !async {
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "an idempotency key is for async calls: add \"async\":true")
		return req, prefer, false
	}
	if async && a.core.Draining() {
		apiError(w, http.StatusServiceUnavailable, protocol.CodeBrokerShutdown, "broker is shutting down")
		return req, prefer, false
	}
	noteCall(w, &req, async)
	return req, prefer, true
}

// begin starts a synchronous call, authorised and valid, to workspace ws:
// it gives it a correlation id if it has none, counts it in flight and
// hands it to the routing core. Its one answer goes to w then, from a
// connection of this broker (holder, which the caller cancels the call on
// if its client goes) or at once; or, when bus is set, nothing was sent
// and the caller calls viaBus off its own goroutine, whose answer is the
// call's. Every answer of a call begin started goes through end. begin
// returns started false, having done nothing, when the broker is draining:
// the caller answers shuttingDown (and ends span).
//
// span is the call's trace (callSpan; nil when it has none): begin names
// the call on it and gives req its traceparent, and end ends it.
func (a *API) begin(ws string, req *protocol.ToolCall, w caller.Waiter, span trace.Span) (holder Holder, bus, started bool) {
	if a.core.Draining() {
		return nil, false, false
	}
	a.calls.Add(1)
	a.inFlight.Add(1)
	if req.CorrelationID == "" {
		req.CorrelationID = uuid.NewString()
	}
	traceBegun(span, req)
	a.log.Debug().Str("correlation_id", req.CorrelationID).Str("endpoint", req.Endpoint).Str("workspace_id", ws).Float64("timeout", req.Timeout).Msg("call received")
	holder, ok := a.core.Dispatch(ws, req, w, span)
	return holder, !ok, true
}

// viaBus makes a call begin did not hand over through the bus: the
// broker's caller publishes it to whichever instance holds ws and waits
// for its answer, by the call's deadline. ctx ending cancels the call.
// The call's span goes with it in the context: the caller's crossing of
// the bus is its child.
func (a *API) viaBus(ctx context.Context, ws string, req *protocol.ToolCall, span trace.Span) protocol.ToolResponse {
	return a.caller.Call(withSpan(ctx, span), callerRequest(ws, req))
}

// end is the one rule for the answer of a call begin started: a call the
// shutdown cut short (the caller closed) answers broker_shutdown, and the
// call stops counting as in flight; its span ends. It returns the answer
// to write.
func (a *API) end(resp protocol.ToolResponse, span trace.Span) protocol.ToolResponse {
	if resp.Error == protocol.CodeCallerClosed && a.core.Draining() {
		resp.Error, resp.Message = protocol.CodeBrokerShutdown, "broker shut down before the call was answered"
	}
	traceEnd(span, &resp)
	a.inFlight.Add(-1)
	a.calls.Done()
	return resp
}

// shuttingDown is the answer of a call begin did not start.
func shuttingDown(cid string) protocol.ToolResponse {
	return protocol.Failure(cid, protocol.CodeBrokerShutdown, "broker is shutting down")
}

// route makes a call and waits for its one answer, on the calling
// goroutine: net/http's handler and the MCP tools call through here.
// ctx ending cancels the call (the client gets tool_cancel). span is the
// call's trace (callSpan), ended with the answer.
func (a *API) route(ctx context.Context, ws string, req protocol.ToolCall, span trace.Span) protocol.ToolResponse {
	ch := make(caller.ChanWaiter, 1)
	holder, bus, started := a.begin(ws, &req, ch, span)
	switch {
	case !started:
		resp := shuttingDown(req.CorrelationID)
		traceEnd(span, &resp)
		return resp
	case bus:
		return a.end(a.viaBus(ctx, ws, &req, span), span)
	case holder == nil:
		return a.end(<-ch, span) // answered at once
	}
	return a.end(a.awaitLocal(ctx, holder, &req, ch), span)
}

// awaitLocal waits for the answer of call, which begin handed to holder
// with the waiter ch. ctx ending cancels the call.
func (a *API) awaitLocal(ctx context.Context, holder Holder, call *protocol.ToolCall, ch caller.ChanWaiter) protocol.ToolResponse {
	// The owner's timer answers at the deadline; this one only guards the
	// promise of an answer against a bug in that path.
	guard := time.NewTimer(time.Until(time.UnixMilli(call.DeadlineMS)) + a.cfg.CallGrace)
	defer guard.Stop()
	select {
	case resp := <-ch:
		return resp
	case <-guard.C:
		holder.CancelCall(call.CorrelationID, "no answer by the deadline")
		a.log.Error().Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Str("workspace_id", holder.WorkspaceID()).Msg("call outlived its deadline in the pending table")
		return protocol.Failure(call.CorrelationID, protocol.CodeTimeout, "no answer by the deadline")
	case <-ctx.Done():
		holder.CancelCall(call.CorrelationID, "caller gone")
		select {
		case resp := <-ch: // answered by the cancel or a racing answer
			return resp
		default: // never delivered (the connection closed meanwhile)
			return protocol.Failure(call.CorrelationID, protocol.CodeCancelled, "caller gave up: "+ctx.Err().Error())
		}
	}
}

// Call makes a call for the MCP tools, on the API's own call path; the
// MCP endpoint authorised the request the tool call came in. The call
// continues the trace context in ctx (the request's traceparent header, or
// the tool call's params._meta.traceparent: package mcp).
func (a *API) Call(ctx context.Context, req caller.Request) protocol.ToolResponse {
	start := time.Now()
	call := protocol.ToolCall{CorrelationID: uuid.NewString(), Endpoint: req.Endpoint, Payload: req.Payload, Timeout: req.Timeout.Seconds()}
	var resp protocol.ToolResponse
	if err := call.Validate(); err != nil {
		resp = protocol.FailureFrom(call.CorrelationID, err, protocol.CodeInvalidRequest)
	} else {
		span := a.callSpan(ctx, "", "", routeMCPPath, req.WorkspaceID, &call)
		resp = a.route(ctx, req.WorkspaceID, call, span)
	}
	a.observe(start, resp)
	a.mcpCalled(ctx, req.WorkspaceID, &call, &resp, start)
	return resp
}

// decodeCallRequest reads a CallRequest body with the protocol's one-pass
// decoder: its fields are a ToolCall's, and a timeout left out or null is
// protocol.DefaultTimeout. The body's members are the ToolCall fields a
// caller may send (protocol.DecodeCallRequest names them); any other
// (reply_to and deadline_ms included: the broker sets those) is refused,
// named, with the field it probably meant.
func decodeCallRequest(body []byte) (protocol.ToolCall, error) {
	call := protocol.ToolCall{Timeout: protocol.DefaultTimeout}
	if err := protocol.DecodeCallRequest(body, &call); err != nil {
		return protocol.ToolCall{}, err
	}
	return call, nil
}

// callerRequest is the caller's request for a call the API received for ws.
func callerRequest(ws string, req *protocol.ToolCall) caller.Request {
	return caller.Request{
		WorkspaceID:      ws,
		Endpoint:         req.Endpoint,
		Payload:          req.Payload,
		Timeout:          req.TimeoutDuration(),
		WaitForWorkspace: time.Duration(req.WaitForWorkspaceMS) * time.Millisecond,
		CorrelationID:    req.CorrelationID,
		IdempotencyKey:   req.IdempotencyKey,
	}
}

// finish writes a call's answer (200 with its ToolResponse) and counts it.
func (a *API) finish(w writer, start time.Time, resp protocol.ToolResponse) {
	a.observe(start, resp)
	noteAnswer(w, &resp)
	// Results come out of validating decoders: copied, not parsed again.
	w.Data(http.StatusOK, "application/json", protocol.AppendToolResponse(make([]byte, 0, 96+len(resp.Result)+len(resp.Message)), &resp))
}

// observe counts a call's outcome and its latency since start.
func (a *API) observe(start time.Time, resp protocol.ToolResponse) {
	outcome := "success"
	if !resp.Success {
		outcome = resp.Error
	}
	a.metrics.calls.WithLabelValues(outcome).Inc()
	a.metrics.latency.Observe(time.Since(start).Seconds())
}
