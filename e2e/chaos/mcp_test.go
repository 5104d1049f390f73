package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP calls: an agent's tool call through the entry broker's MCP endpoint
// (/api/v1/workspaces/{id}/mcp), over the Go SDK's streamable HTTP client.
// Each call is a session of its own, as a short-lived agent's would be
// (initialize, file_read, close), so no session outlives a broker restart.
// The tool reads whoami.txt from the bridge's root, which names the
// workspace: the answer must come from the workspace called. (A file read
// echoes no nonce; the MCP calls check identity, time and success.)
//
// A tool call's deadline is the tool's own: file_read gives its tether
// call mcpToolTimeout, whatever the agent waits, and the tool answers
// timeout when that is over. The run waits up to 5 s longer, so an answer
// later than the deadline plus the bound is seen (and reported) as late.

// mcpToolTimeout is file_read's tether call timeout (package mcp's
// quickCall): an MCP call's deadline.
const mcpToolTimeout = 5 * time.Second

// whoamiFile is the file in every bridge root that names its workspace.
const whoamiFile = "whoami.txt"

func whoami(ws string) string { return "whoami " + ws }

// bearer adds a caller token to every request of the MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpCall makes call c as an MCP tool call and returns its outcome: "ok",
// the tether code of a tool error, or an mcp_* failure of the session.
func (r *run) mcpCall(c *call) (outcome, bad string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout+5*time.Second)
	defer cancel()
	b := r.topo.brokers[c.entry]
	tr := &sdk.StreamableClientTransport{
		Endpoint:   b.url + "/api/v1/workspaces/" + c.ws.id + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{r.topo.caller, r.httpTr}},
		MaxRetries: -1,
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "chaos", Version: "0"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		return "mcp_connect_failed", ""
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "file_read", Arguments: map[string]any{"path": whoamiFile}})
	switch {
	case err != nil && ctx.Err() != nil:
		return "mcp_no_answer", "" // late: the lateness check reports it
	case err != nil:
		return "mcp_call_failed", ""
	}
	text := ""
	if len(res.Content) > 0 {
		if t, ok := res.Content[0].(*sdk.TextContent); ok {
			text = t.Text
		}
	}
	if res.IsError {
		code, _, _ := strings.Cut(strings.TrimPrefix(text, "Error "), ":")
		if code = strings.TrimSpace(code); code == "" || strings.ContainsAny(code, " \n") {
			return "mcp_tool_error", "a tool error without a tether code: " + text
		}
		return code, ""
	}
	var out struct{ Content string }
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		return "wrong_result", fmt.Sprintf("file_read's structured result %.200s: %v", raw, err)
	}
	want := whoami(c.ws.id)
	switch {
	case strings.Contains(out.Content, want+"\n") || strings.HasSuffix(out.Content, want):
		return outcomeOK, ""
	case strings.Contains(out.Content, "whoami "):
		return "wrong_workspace", fmt.Sprintf("file_read of %s's %s answered %q", c.ws.id, whoamiFile, out.Content)
	}
	return "wrong_result", fmt.Sprintf("file_read of %s answered %q, want a line %q", whoamiFile, out.Content, want)
}
