package caller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"

	"github.com/tetherdev/tether/protocol"
)

// HTTP is a caller on a broker's HTTP API. It is safe for concurrent use.
type HTTP struct {
	// BaseURL of the broker, e.g. http://127.0.0.1:8377 (ws:// is accepted
	// and turned into http://).
	BaseURL string
	// Token is a caller token (empty when the broker runs without auth).
	Token string
	// Client defaults to a client without a timeout of its own: each call
	// bounds itself by its timeout plus a margin.
	Client *http.Client
}

// httpMargin is how much longer than the call's timeout the HTTP request may
// take: the broker answers by then even when the workspace never does.
const httpMargin = 5 * time.Second

// Call implements Caller. The trace context of the span in ctx goes with
// the call as its traceparent header.
func (h *HTTP) Call(ctx context.Context, req Request) protocol.ToolResponse {
	cid := req.CorrelationID
	if cid == "" {
		cid = uuid.NewString()
	}
	timeout := req.timeout()
	body := map[string]any{
		"endpoint":       req.Endpoint,
		"timeout":        timeout.Seconds(),
		"correlation_id": cid,
	}
	if len(req.Payload) > 0 {
		body["payload"] = req.Payload
	}
	if req.WaitForWorkspace > 0 {
		body["wait_for_workspace_ms"] = req.WaitForWorkspace.Milliseconds()
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return protocol.Failure(cid, protocol.CodeInvalidRequest, "encoding call: "+err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+httpMargin)
	defer cancel()
	res, err := h.do(ctx, http.MethodPost, "/api/v1/workspaces/"+url.PathEscape(req.WorkspaceID)+"/calls", raw)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return protocol.Failure(cid, protocol.CodeTimeout, "broker did not answer in time: "+err.Error())
		}
		return protocol.Failure(cid, protocol.CodeBrokerUnreachable, "calling broker: "+err.Error())
	}
	defer res.Body.Close()
	out, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return protocol.Failure(cid, protocol.CodeBrokerUnreachable, "reading broker answer: "+err.Error())
	}
	var resp protocol.ToolResponse
	if err := json.Unmarshal(out, &resp); err != nil || (!resp.Success && resp.Error == "") {
		return protocol.Failure(cid, protocol.CodeBrokerUnreachable, fmt.Sprintf("broker answered HTTP %d: %.200s", res.StatusCode, out))
	}
	if resp.CorrelationID == "" {
		resp.CorrelationID = cid
	}
	return resp
}

// do sends one request to the broker, with the token and, for a body, its
// JSON content type.
func (h *HTTP) do(ctx context.Context, method, path string, body []byte, header ...string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(httpBase(h.BaseURL), "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if h.Token != "" {
		hreq.Header.Set("Authorization", "Bearer "+h.Token)
	}
	injectTrace(ctx, propagation.HeaderCarrier(hreq.Header))
	for i := 0; i+1 < len(header); i += 2 {
		hreq.Header.Set(header[i], header[i+1])
	}
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	return client.Do(hreq)
}

// httpBase turns ws(s):// into http(s):// and adds a scheme when missing.
func httpBase(s string) string {
	switch {
	case strings.HasPrefix(s, "ws://"):
		return "http://" + s[len("ws://"):]
	case strings.HasPrefix(s, "wss://"):
		return "https://" + s[len("wss://"):]
	case strings.HasPrefix(s, "http://"), strings.HasPrefix(s, "https://"):
		return s
	}
	return "http://" + s
}
