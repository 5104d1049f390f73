package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Event names on the wire.
const (
	EventToolCall     = "tool_call"
	EventToolResponse = "tool_response"
	EventToolCancel   = "tool_cancel"
)

// Bounds of ToolCall.Timeout, in seconds.
const (
	MinTimeout     = 0.1
	MaxTimeout     = 600.0
	DefaultTimeout = 30.0
)

// ToolCall asks the workspace's client to serve endpoint with payload.
// Timeout is in seconds. ReplyTo and DeadlineMS are set by the bus between
// broker instances and are not sent to clients.
type ToolCall struct {
	CorrelationID string          `json:"correlation_id"`
	Endpoint      string          `json:"endpoint"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Timeout       float64         `json:"timeout"`
	ReplyTo       string          `json:"reply_to,omitempty"`
	DeadlineMS    int64           `json:"deadline_ms,omitempty"`
	// WaitForWorkspaceMS is the longest a call for an offline workspace
	// waits for it to connect (bounded by the deadline); 0 answers
	// workspace_offline at once.
	WaitForWorkspaceMS int64 `json:"wait_for_workspace_ms,omitempty"`
	// Async, in a caller's request, asks for a durable async call: the
	// broker records it and answers at once with its id
	// (docs/async-calls.md). On the broker side it marks a call whose
	// outcome goes to the call store instead of a caller's inbox. It is
	// never sent to clients.
	Async bool `json:"async,omitempty"`
	// IdempotencyKey, in a caller's async request, makes a retried submit
	// return the call already made with the same key instead of making
	// another. It is never sent to clients.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Traceparent is the W3C trace context of the call (the span that sent
	// it), set by the broker when tracing is on: over the bus, and on the
	// socket to the workspace client, which continues the trace or ignores
	// it (docs/wire.md). A caller passes it as the traceparent HTTP header,
	// never in the body.
	Traceparent string `json:"traceparent,omitempty"`
}

// TimeoutDuration returns Timeout as a duration.
func (c *ToolCall) TimeoutDuration() time.Duration {
	return time.Duration(c.Timeout * float64(time.Second))
}

// Validate checks the fields every call must have. It returns a *Error with
// CodeInvalidRequest.
func (c *ToolCall) Validate() error {
	if c.Endpoint == "" {
		return Errorf(CodeInvalidRequest, "endpoint is required")
	}
	if c.Endpoint[0] != '/' {
		return Errorf(CodeInvalidRequest, "endpoint must start with '/': %q", c.Endpoint)
	}
	if math.IsNaN(c.Timeout) || c.Timeout < MinTimeout || c.Timeout > MaxTimeout {
		return Errorf(CodeInvalidRequest, "timeout must be between %g and %g seconds, got %g", MinTimeout, MaxTimeout, c.Timeout)
	}
	// The payload goes to the client in a WebSocket text frame, which
	// must be UTF-8: a client that checks (the ws package under
	// socket.io-client does) would close its connection over it.
	// Strings were decoded into valid UTF-8 already; only the raw
	// payload can hold anything else.
	if !utf8.Valid(c.Payload) {
		return Errorf(CodeInvalidRequest, "payload is not valid UTF-8")
	}
	return nil
}

// ToolResponse is the single answer to a ToolCall. Success true carries
// Result; false carries Error (a code from errors.go) and Message.
type ToolResponse struct {
	CorrelationID string          `json:"correlation_id"`
	Success       bool            `json:"success"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         string          `json:"error,omitempty"`
	Message       string          `json:"message,omitempty"`
}

// Failure builds an unsuccessful response.
func Failure(correlationID, code, message string) ToolResponse {
	return ToolResponse{CorrelationID: correlationID, Error: code, Message: message}
}

// FailureFrom builds an unsuccessful response from err, keeping the code of a
// *Error and using fallback otherwise.
func FailureFrom(correlationID string, err error, fallback string) ToolResponse {
	var e *Error
	if errors.As(err, &e) {
		return Failure(correlationID, e.Code, e.Message)
	}
	return Failure(correlationID, fallback, err.Error())
}

// Success builds a successful response with a JSON result.
func Success(correlationID string, result json.RawMessage) ToolResponse {
	return ToolResponse{CorrelationID: correlationID, Success: true, Result: result}
}

// Err returns the response's failure as a *Error, or nil on success.
func (r *ToolResponse) Err() error {
	if r.Success {
		return nil
	}
	return &Error{Code: r.Error, Message: r.Message}
}

// ToolCancel tells a client that the caller no longer waits for a call.
type ToolCancel struct {
	CorrelationID string `json:"correlation_id"`
	Reason        string `json:"reason"`
}

// DecodeResponse parses a ToolResponse sent by a client (as an ack argument
// or a tool_response event). An empty object or one without a correlation id
// and outcome is not an answer: ok is false. A failure without an error code
// gets CodeInternalError, so every answer a caller sees carries a code.
// Result aliases raw.
func DecodeResponse(raw json.RawMessage) (resp ToolResponse, ok bool, err error) {
	if firstNonSpace(raw) != '{' {
		return resp, false, malformed("tool response must be an object")
	}
	if err := DecodeToolResponse(raw, &resp); err != nil {
		return resp, false, malformed("tool response: %v", err)
	}
	if !resp.Success && resp.Error == "" && resp.Result == nil && resp.Message == "" {
		return resp, false, nil
	}
	if !resp.Success && resp.Error == "" {
		resp.Error = CodeInternalError
		if resp.Message == "" {
			resp.Message = "client answered success:false without an error code"
		}
	}
	return resp, true, nil
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
