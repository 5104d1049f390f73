package caller

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// The async API of a broker over HTTP (docs/async-calls.md):
//
//	POST /api/v1/workspaces/{id}/calls  {"async":true,…}  → 202, the record
//	  with Prefer: respond-async, wait=S                → 200, the final record, or 202
//	GET  /api/v1/calls/{correlation_id}[?wait=S]          → 200, the record
//	POST /api/v1/calls/{correlation_id}/cancel            → 200, the record

// httpOpMargin bounds an async request beyond the wait it asks for.
const httpOpMargin = 10 * time.Second

// Submit implements Async.
func (h *HTTP) Submit(ctx context.Context, req Request) (store.Record, error) {
	raw, err := submitBody(&req)
	if err != nil {
		return store.Record{}, err
	}
	return h.record(ctx, http.MethodPost, submitPath(&req), raw, 0, nil, http.StatusAccepted)
}

// SubmitWait implements Async: one request, whose Prefer header asks the
// broker to hold its answer up to max (at most MaxWaitPerRequest) for the
// outcome; a call still running then is waited for as by Wait.
func (h *HTTP) SubmitWait(ctx context.Context, req Request, max time.Duration) (store.Record, error) {
	raw, err := submitBody(&req)
	if err != nil {
		return store.Record{}, err
	}
	end := time.Now().Add(max)
	first := min(max, MaxWaitPerRequest).Truncate(time.Millisecond)
	if first < 0 {
		first = 0
	}
	prefer := "respond-async, wait=" + strconv.FormatFloat(first.Seconds(), 'f', -1, 64)
	rec, err := h.record(ctx, http.MethodPost, submitPath(&req), raw, first, []string{"Prefer", prefer}, http.StatusOK, http.StatusAccepted)
	if err != nil || store.IsFinal(rec.Status) || !time.Now().Before(end) {
		return rec, err
	}
	final, err := h.Wait(ctx, rec.CorrelationID, time.Until(end))
	if err != nil {
		return rec, err
	}
	return final, nil
}

func submitPath(req *Request) string {
	return "/api/v1/workspaces/" + url.PathEscape(req.WorkspaceID) + "/calls"
}

// submitBody is the body of req's async submit.
func submitBody(req *Request) ([]byte, error) {
	body := map[string]any{
		"endpoint": req.Endpoint,
		"timeout":  req.timeout().Seconds(),
		"async":    true,
	}
	if req.CorrelationID != "" {
		body["correlation_id"] = req.CorrelationID
	}
	if len(req.Payload) > 0 {
		body["payload"] = req.Payload
	}
	if req.WaitForWorkspace != 0 {
		body["wait_for_workspace_ms"] = req.WaitForWorkspace.Milliseconds()
	}
	if req.IdempotencyKey != "" {
		body["idempotency_key"] = req.IdempotencyKey
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "encoding call: %v", err)
	}
	return raw, nil
}

// Status implements Async.
func (h *HTTP) Status(ctx context.Context, cid string) (store.Record, error) {
	return h.record(ctx, http.MethodGet, callPath(cid), nil, 0, nil, http.StatusOK)
}

// Wait implements Async, with one request per MaxWaitPerRequest.
func (h *HTTP) Wait(ctx context.Context, cid string, max time.Duration) (store.Record, error) {
	end := time.Now().Add(max)
	for {
		left := min(time.Until(end), MaxWaitPerRequest)
		if left < 0 {
			left = 0
		}
		// Whole milliseconds, as the broker reads them.
		secs := strconv.FormatFloat(left.Truncate(time.Millisecond).Seconds(), 'f', -1, 64)
		rec, err := h.record(ctx, http.MethodGet, callPath(cid)+"?wait="+secs, nil, left, nil, http.StatusOK)
		if err != nil || store.IsFinal(rec.Status) || !time.Now().Before(end) {
			return rec, err
		}
	}
}

// Cancel implements Async.
func (h *HTTP) Cancel(ctx context.Context, cid string) (store.Record, error) {
	return h.record(ctx, http.MethodPost, callPath(cid)+"/cancel", nil, 0, nil, http.StatusOK)
}

func callPath(cid string) string { return "/api/v1/calls/" + url.PathEscape(cid) }

// record sends one request of the async API, with header's name/value
// pairs, and reads the record it answers with one of the statuses want;
// other answers become coded errors. wait is how long the broker may hold
// the request.
func (h *HTTP) record(ctx context.Context, method, path string, body []byte, wait time.Duration, header []string, want ...int) (store.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+httpOpMargin)
	defer cancel()
	res, err := h.do(ctx, method, path, body, header...)
	if err != nil {
		return store.Record{}, protocol.Errorf(protocol.CodeBrokerUnreachable, "calling broker: %v", err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return store.Record{}, protocol.Errorf(protocol.CodeBrokerUnreachable, "reading broker answer: %v", err)
	}
	if !slices.Contains(want, res.StatusCode) {
		var fail protocol.ToolResponse
		if json.Unmarshal(out, &fail) != nil || fail.Error == "" {
			return store.Record{}, protocol.Errorf(protocol.CodeBrokerUnreachable, "broker answered HTTP %d: %.200s", res.StatusCode, out)
		}
		return store.Record{}, &protocol.Error{Code: fail.Error, Message: fail.Message}
	}
	var rec store.Record
	if err := json.Unmarshal(out, &rec); err != nil || rec.CorrelationID == "" {
		return store.Record{}, protocol.Errorf(protocol.CodeBrokerUnreachable, "broker answered HTTP %d with no call record: %.200s", res.StatusCode, out)
	}
	return rec, nil
}
