package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tetherdev/tether/broker/auth"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

// CallRequest is the body of POST /api/v1/workspaces/{id}/calls.
type CallRequest struct {
	Endpoint string          `json:"endpoint"`
	Payload  json.RawMessage `json:"payload"`
	// Timeout in seconds, in [0.1, 600]; default 30.
	Timeout *float64 `json:"timeout"`
	// CorrelationID is generated when absent.
	CorrelationID string `json:"correlation_id"`
	// WaitForWorkspaceMS > 0 holds the call while the workspace is offline,
	// for that long at most, instead of answering workspace_offline at once
	// (caller.Request.WaitForWorkspace).
	WaitForWorkspaceMS int64 `json:"wait_for_workspace_ms"`
	// Async asks for an async call (also: the header Prefer:
	// respond-async): the answer is 202 with the call's record at once,
	// and the call is read and ended under /api/v1/calls/{correlation_id}
	// (docs/async-calls.md).
	Async bool `json:"async"`
	// IdempotencyKey (also: the header Idempotency-Key), for an async call:
	// a submit with a key already used in the workspace, within the
	// retention, returns that call.
	IdempotencyKey string `json:"idempotency_key"`
}

func (b *Broker) routes() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.HandleMethodNotAllowed = true
	r.POST("/api/v1/workspaces/:id/calls", b.handleCall)
	r.GET("/api/v1/workspaces", b.handleList)
	r.GET("/api/v1/calls/:cid", b.handleCallStatus)
	r.POST("/api/v1/calls/:cid/cancel", b.handleCallCancel)
	r.Any("/api/v1/workspaces/:id/mcp", b.handleMCP)
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok", "instance": b.cfg.InstanceID}) })
	r.GET("/readyz", func(c *gin.Context) {
		if err := b.Ready(c.Request.Context()); err != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "not ready", "reason": err.Error()})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	})
	metricsHandler := promhttp.HandlerFor(b.metrics.reg, promhttp.HandlerOpts{})
	r.GET("/metrics", gin.WrapH(metricsHandler))
	r.NoRoute(func(c *gin.Context) {
		apiError(c, http.StatusNotFound, protocol.CodeInvalidRequest, "no such path: "+c.Request.URL.Path)
	})
	r.NoMethod(func(c *gin.Context) {
		apiError(c, http.StatusMethodNotAllowed, protocol.CodeInvalidRequest, "method not allowed: "+c.Request.Method)
	})

	mux := http.NewServeMux()
	mux.HandleFunc("/socket.io/", b.handleSocket)
	mux.Handle("/", r)
	return mux
}

// apiWriter is where a handler of the API writes its one answer: gin's
// Context, or the call server's connection (callserver.go), which serves
// POST .../calls without net/http. Header adds a header to the answer;
// Data writes it.
type apiWriter interface {
	Header(key, value string)
	Data(code int, contentType string, data []byte)
}

// apiError answers a request that never became a call.
func apiError(w apiWriter, status int, code, msg string) {
	body, _ := json.Marshal(protocol.ToolResponse{Error: code, Message: msg})
	w.Data(status, "application/json; charset=utf-8", body)
}

func bearer(r *http.Request) string { return bearerOf(r.Header.Get("Authorization")) }

// bearerOf is the token of an Authorization header's value.
func bearerOf(h string) string {
	if strings.HasPrefix(h, "Bearer ") {
		return strings.TrimSpace(h[len("Bearer "):])
	}
	return ""
}

func authStatus(err error) int {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeForbidden {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

func (b *Broker) handleCall(c *gin.Context) {
	start := time.Now()
	ws := c.Param("id")
	if !b.callAuthorized(c, ws, bearer(c.Request)) {
		return
	}
	// The body holds the payload plus a little envelope.
	limit := int64(b.cfg.MaxPayload)
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, limit+1))
	if err != nil {
		apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, "reading body: "+err.Error())
		return
	}
	req, prefer, ok := b.acceptCall(c, body, c.GetHeader("Idempotency-Key"), c.Request.Header.Values("Prefer"))
	switch {
	case !ok:
	case prefer.async || req.Async:
		b.submit(c.Request.Context(), c, ws, req, prefer)
	default:
		b.finish(c, start, b.route(c.Request.Context(), ws, req))
	}
}

// callAuthorized checks that token may call workspace ws; when it may
// not, it answers w and returns false. Both servers of POST .../calls
// check this before they read the body.
func (b *Broker) callAuthorized(w apiWriter, ws, token string) bool {
	if _, err := b.auth.Verify(token, auth.RoleCaller, ws); err != nil {
		refusal := protocol.FailureFrom("", err, protocol.CodeUnauthorized)
		b.metrics.calls.WithLabelValues(refusal.Error).Inc()
		apiError(w, authStatus(err), refusal.Error, refusal.Message)
		return false
	}
	return true
}

// acceptCall reads the body of a POST .../calls (at most MaxPayload+1
// bytes of it) with the request's Idempotency-Key and Prefer headers, for
// both servers of the call API. It returns the call and what the request
// prefers; an async call has req.Async or prefer.async set. A request that
// is refused is answered on w, and ok is false.
func (b *Broker) acceptCall(w apiWriter, body []byte, idemKey string, preferValues []string) (req protocol.ToolCall, prefer preferences, ok bool) {
	if len(body) > b.cfg.MaxPayload {
		b.metrics.calls.WithLabelValues(protocol.CodePayloadTooLarge).Inc()
		apiError(w, http.StatusRequestEntityTooLarge, protocol.CodePayloadTooLarge, "request body over the broker's maxPayload")
		return req, prefer, false
	}
	req, err := decodeCallRequest(body)
	if err != nil {
		b.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, "call body: "+err.Error())
		return req, prefer, false
	}
	if len(req.Payload) == 0 || bytes.Equal(req.Payload, []byte("null")) {
		req.Payload = json.RawMessage("{}")
	}
	if err := req.Validate(); err != nil {
		b.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
		apiError(w, http.StatusBadRequest, protocol.CodeInvalidRequest, protocol.FailureFrom("", err, protocol.CodeInvalidRequest).Message)
		return req, prefer, false
	}
	if req.WaitForWorkspaceMS < 0 {
		b.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
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
	if async && b.isDraining() {
		apiError(w, http.StatusServiceUnavailable, protocol.CodeBrokerShutdown, "broker is shutting down")
		return req, prefer, false
	}
	return req, prefer, true
}

// route sends an authorised, valid call to workspace ws and returns its one
// answer: to the holder in this process (dispatch), else through the bus.
// ctx ending cancels the call (the client gets tool_cancel). The HTTP call
// API and the MCP endpoint (mcp.go) both call through here.
func (b *Broker) route(ctx context.Context, ws string, req protocol.ToolCall) protocol.ToolResponse {
	if b.isDraining() {
		return protocol.Failure(req.CorrelationID, protocol.CodeBrokerShutdown, "broker is shutting down")
	}
	b.apiCalls.Add(1)
	b.apiInFlight.Add(1)
	defer func() { b.apiInFlight.Add(-1); b.apiCalls.Done() }()
	ch := make(chanWaiter, 1)
	var resp protocol.ToolResponse
	if holder, ok := b.dispatch(ws, &req, ch); !ok {
		resp = b.callBus(ctx, ws, req)
	} else if holder == nil {
		resp = <-ch // answered at once
	} else {
		resp = b.awaitHeld(ctx, holder, &req, ch)
	}
	if resp.Error == protocol.CodeCallerClosed && b.isDraining() {
		resp.Error, resp.Message = protocol.CodeBrokerShutdown, "broker shut down before the call was answered"
	}
	return resp
}

// dispatch starts a call of this broker's API for ws without waiting for
// it, when the call needs no bus: to the holder in this process on the
// in-memory bus, or on any bus when this broker holds the workspace and may
// hand it the call (heldForCall). It gives req a correlation id if it has
// none. Its one answer goes to w: at once (holder nil; the workspace is
// offline), or from holder's call table. ok is false when the call must go
// through the bus (callBus): nothing was done then.
func (b *Broker) dispatch(ws string, req *protocol.ToolCall, w waiter) (holder *conn, ok bool) {
	if req.CorrelationID == "" {
		req.CorrelationID = uuid.NewString()
	}
	b.log.Debug().Str("correlation_id", req.CorrelationID).Str("endpoint", req.Endpoint).Str("workspace_id", ws).Float64("timeout", req.Timeout).Msg("call received")
	if b.inlineReplies && req.WaitForWorkspaceMS <= 0 {
		b.mu.Lock()
		holder = b.holders[ws]
		b.mu.Unlock()
		if holder == nil {
			b.log.Debug().Str("correlation_id", req.CorrelationID).Str("endpoint", req.Endpoint).Str("workspace_id", ws).Msg("workspace offline")
			w.answer(protocol.Failure(req.CorrelationID, protocol.CodeWorkspaceOffline, fmt.Sprintf("no client serves workspace %q", ws)))
			return nil, true
		}
	} else if holder = b.heldForCall(ws); holder == nil {
		return nil, false
	}
	b.callHeld(holder, req, w)
	return holder, true
}

// decodeCallRequest reads a CallRequest body with the protocol's one-pass
// decoder: its fields are a ToolCall's, and a timeout left out or null is
// protocol.DefaultTimeout. A member that is not a CallRequest field
// (reply_to and deadline_ms included: the broker sets those) is refused,
// named, with the field it probably meant. async and idempotency_key are
// CallRequest fields, for handleCall.
func decodeCallRequest(body []byte) (protocol.ToolCall, error) {
	call := protocol.ToolCall{Timeout: protocol.DefaultTimeout}
	if err := protocol.DecodeCallRequest(body, &call); err != nil {
		return protocol.ToolCall{}, err
	}
	return call, nil
}

func (b *Broker) callBus(ctx context.Context, ws string, req protocol.ToolCall) protocol.ToolResponse {
	return b.caller.Call(ctx, callerRequest(ws, &req))
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

func (b *Broker) finish(w apiWriter, start time.Time, resp protocol.ToolResponse) {
	b.observe(start, resp)
	// Results come out of validating decoders: copied, not parsed again.
	w.Data(http.StatusOK, "application/json", protocol.AppendToolResponse(make([]byte, 0, 96+len(resp.Result)+len(resp.Message)), &resp))
}

// observe counts a call's outcome and its latency since start.
func (b *Broker) observe(start time.Time, resp protocol.ToolResponse) {
	outcome := "success"
	if !resp.Success {
		outcome = resp.Error
	}
	b.metrics.calls.WithLabelValues(outcome).Inc()
	b.metrics.latency.Observe(time.Since(start).Seconds())
}

func (b *Broker) handleList(c *gin.Context) {
	claims, err := b.auth.Verify(bearer(c.Request), auth.RoleCaller, "")
	if err != nil {
		refusal := protocol.FailureFrom("", err, protocol.CodeUnauthorized)
		apiError(c, authStatus(err), refusal.Error, refusal.Message)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), listWait)
	defer cancel()
	list, unanswered, err := b.AllWorkspaces(ctx)
	if err != nil {
		apiError(c, http.StatusServiceUnavailable, protocol.CodeBusUnavailable, "listing workspaces: "+err.Error())
		return
	}
	visible := make([]Workspace, 0, len(list))
	for _, w := range list {
		if claims.Allows(w.WorkspaceID) {
			visible = append(visible, w)
		}
	}
	c.JSON(http.StatusOK, gin.H{"workspaces": visible, "unanswered_instances": unanswered})
}

// listWait bounds how long GET /api/v1/workspaces waits for the other
// instances' answers; an instance that does not answer in time is counted
// in unanswered_instances.
const listWait = time.Second
