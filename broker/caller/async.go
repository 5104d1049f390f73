package caller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// Async calls (docs/async-calls.md): Submit records a call and returns at
// once; the workspace's holder runs it and records its outcome; Status,
// Wait and Cancel read and end it from anywhere, later, even after the
// submitting process died.

// Async is implemented by BusCaller (given a Store) and HTTP. Errors are
// *protocol.Error values with a code: invalid_request, conflict (an
// idempotency key reused with another request, or a correlation id taken),
// call_not_found, bus_unavailable (the store cannot be reached), forbidden
// and unauthorized (HTTP), broker_unreachable (HTTP).
type Async interface {
	// Submit records req as an async call and starts it. The record it
	// returns is queued (or already failed workspace_offline: nobody
	// serves the workspace and req does not wait for it). With an
	// IdempotencyKey used before in the workspace, within the retention,
	// it returns that call instead.
	Submit(ctx context.Context, req Request) (store.Record, error)
	// SubmitWait is Submit, then a wait of up to max for the outcome: the
	// record it returns is final when the call ended in time. Over HTTP a
	// call that ends within MaxWaitPerRequest costs one request (Prefer:
	// respond-async, wait=). An error after the submit comes with the
	// record as submitted.
	SubmitWait(ctx context.Context, req Request, max time.Duration) (store.Record, error)
	// Status returns the call's record as it is now.
	Status(ctx context.Context, correlationID string) (store.Record, error)
	// Wait returns the call's record once it is final, or after max with
	// its status then.
	Wait(ctx context.Context, correlationID string, max time.Duration) (store.Record, error)
	// Cancel ends a call that has no outcome yet with cancelled (the
	// client is told to stop a delivered call) and returns its record; a
	// call that has an outcome keeps it.
	Cancel(ctx context.Context, correlationID string) (store.Record, error)
}

var (
	_ Async = (*BusCaller)(nil)
	_ Async = (*HTTP)(nil)
)

// MaxWaitPerRequest is the longest one GET /api/v1/calls/{id}?wait= may
// hold; HTTP.Wait repeats requests for longer waits.
const MaxWaitPerRequest = 60 * time.Second

// NewRecord is the record of req submitted at now, queued; it checks req
// as a submit does and gives it a correlation id when it has none. A
// broker that records a call it delivered itself (Broker.submitLocalWait)
// makes its record here too. The record keeps the trace context of the
// span in ctx, which the call's delivery continues.
func NewRecord(ctx context.Context, req *Request, now time.Time) (store.Record, error) {
	if req.CorrelationID == "" {
		req.CorrelationID = uuid.NewString()
	}
	timeout := req.timeout()
	call := protocol.ToolCall{CorrelationID: req.CorrelationID, Endpoint: req.Endpoint, Timeout: timeout.Seconds()}
	if err := call.Validate(); err != nil {
		return store.Record{}, err
	}
	switch {
	case req.WorkspaceID == "":
		return store.Record{}, protocol.Errorf(protocol.CodeInvalidRequest, "workspace_id is required")
	case req.WaitForWorkspace < 0:
		return store.Record{}, protocol.Errorf(protocol.CodeInvalidRequest, "wait_for_workspace must not be negative")
	case len(req.Payload) > 0 && !protocol.Valid(req.Payload):
		return store.Record{}, protocol.Errorf(protocol.CodeInvalidRequest, "payload is not valid JSON")
	}
	payload := req.Payload
	if len(payload) == 0 || string(payload) == "null" {
		payload = json.RawMessage("{}")
	}
	rec := store.Record{
		CorrelationID:  req.CorrelationID,
		WorkspaceID:    req.WorkspaceID,
		Endpoint:       req.Endpoint,
		Payload:        payload,
		Timeout:        timeout.Seconds(),
		CreatedAt:      now,
		Deadline:       now.Add(timeout),
		IdempotencyKey: req.IdempotencyKey,
		Traceparent:    tracing.Format(trace.SpanContextFromContext(ctx)),
	}
	if req.IdempotencyKey != "" {
		// Only a retry with the key is compared with what it asked for.
		rec.Fingerprint = fingerprint(req, payload)
	}
	if end, code := req.waitEnd(now); req.WaitForWorkspace > 0 && code == protocol.CodeWorkspaceOffline {
		rec.OfflineAt = end
	}
	return rec, nil
}

// fingerprint identifies what a submit asks for, so that a retry with the
// same idempotency key can be told from another request: the endpoint, the
// payload (compacted: spacing does not count), the timeout and the wait.
func fingerprint(req *Request, payload json.RawMessage) string {
	h := sha256.New()
	var compact bytes.Buffer
	if json.Compact(&compact, payload) != nil {
		compact.Write(payload)
	}
	for _, part := range [][]byte{
		[]byte(req.Endpoint), compact.Bytes(),
		strconv.AppendInt(nil, req.timeout().Milliseconds(), 10),
		strconv.AppendInt(nil, req.WaitForWorkspace.Milliseconds(), 10),
	} {
		h.Write(strconv.AppendInt(nil, int64(len(part)), 10))
		h.Write([]byte{':'})
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
