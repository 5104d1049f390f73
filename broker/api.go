package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

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

// apiError answers a request that never became a call.
func apiError(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, protocol.ToolResponse{Error: code, Message: msg})
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
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
	if _, err := b.auth.verify(bearer(c.Request), RoleCaller, ws); err != nil {
		refusal := protocol.FailureFrom("", err, protocol.CodeUnauthorized)
		b.metrics.calls.WithLabelValues(refusal.Error).Inc()
		apiError(c, authStatus(err), refusal.Error, refusal.Message)
		return
	}
	// The body holds the payload plus a little envelope.
	limit := int64(b.cfg.MaxPayload)
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, limit+1))
	if err != nil {
		apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, "reading body: "+err.Error())
		return
	}
	if int64(len(body)) > limit {
		b.metrics.calls.WithLabelValues(protocol.CodePayloadTooLarge).Inc()
		apiError(c, http.StatusRequestEntityTooLarge, protocol.CodePayloadTooLarge, "request body over the broker's maxPayload")
		return
	}
	req, err := decodeCallRequest(body)
	if err != nil {
		b.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
		apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, "call body: "+err.Error())
		return
	}
	if len(req.Payload) == 0 || bytes.Equal(req.Payload, []byte("null")) {
		req.Payload = json.RawMessage("{}")
	}
	if err := req.Validate(); err != nil {
		b.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
		apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, protocol.FailureFrom("", err, protocol.CodeInvalidRequest).Message)
		return
	}
	if req.WaitForWorkspaceMS < 0 {
		b.metrics.calls.WithLabelValues(protocol.CodeInvalidRequest).Inc()
		apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, "wait_for_workspace_ms must not be negative")
		return
	}
	if key := c.GetHeader("Idempotency-Key"); key != "" {
		if req.IdempotencyKey != "" && req.IdempotencyKey != key {
			apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, "the Idempotency-Key header and the idempotency_key field differ")
			return
		}
		req.IdempotencyKey = key
	}
	prefer, err := parsePrefer(c.Request.Header)
	async := req.Async || prefer.async
	if err != nil && async {
		apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, err.Error())
		return
	}
	if req.IdempotencyKey != "" && !async {
		apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, "an idempotency key is for async calls: add \"async\":true")
		return
	}
	if async {
		if b.isDraining() {
			apiError(c, http.StatusServiceUnavailable, protocol.CodeBrokerShutdown, "broker is shutting down")
			return
		}
		b.submit(c, ws, req, prefer)
		return
	}
	b.finish(c, start, b.route(c.Request.Context(), ws, req))
}

// route sends an authorised, valid call to workspace ws and returns its one
// answer: to the holder in this process on the in-memory bus, or on any bus
// when this broker holds the workspace and may hand it the call
// (heldForCall), else through the bus. ctx ending cancels the call (the
// client gets tool_cancel). The HTTP call API and the MCP endpoint
// (mcp.go) both call through here.
func (b *Broker) route(ctx context.Context, ws string, req protocol.ToolCall) protocol.ToolResponse {
	if b.isDraining() {
		return protocol.Failure(req.CorrelationID, protocol.CodeBrokerShutdown, "broker is shutting down")
	}
	b.apiCalls.Add(1)
	b.apiInFlight.Add(1)
	defer func() { b.apiInFlight.Add(-1); b.apiCalls.Done() }()
	if req.CorrelationID == "" {
		req.CorrelationID = uuid.NewString()
	}
	b.log.Debug().Str("correlation_id", req.CorrelationID).Str("endpoint", req.Endpoint).Str("workspace_id", ws).Float64("timeout", req.Timeout).Msg("call received")
	var resp protocol.ToolResponse
	if b.inlineReplies && req.WaitForWorkspaceMS <= 0 {
		resp = b.callLocal(ctx, ws, req)
	} else if c := b.heldForCall(ws); c != nil {
		resp = b.callHeld(ctx, c, req)
	} else {
		resp = b.callBus(ctx, ws, req)
	}
	if resp.Error == protocol.CodeCallerClosed && b.isDraining() {
		resp.Error, resp.Message = protocol.CodeBrokerShutdown, "broker shut down before the call was answered"
	}
	return resp
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

func (b *Broker) finish(c *gin.Context, start time.Time, resp protocol.ToolResponse) {
	b.observe(start, resp)
	// Results come out of validating decoders: copied, not parsed again.
	c.Data(http.StatusOK, "application/json", protocol.AppendToolResponse(make([]byte, 0, 96+len(resp.Result)+len(resp.Message)), &resp))
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
	claims, err := b.auth.verify(bearer(c.Request), RoleCaller, "")
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
