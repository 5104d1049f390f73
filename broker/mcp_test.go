package broker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/api"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/mcp"
	"github.com/tetherdev/tether/protocol"
)

// bearerTransport adds a caller token to every request of an MCP client.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (e *env) mcpURL(ws string) string { return e.srv.URL + "/api/v1/workspaces/" + ws + "/mcp" }

// mcpClient opens an MCP session on ws's endpoint with token.
func (e *env) mcpClient(ws, token string) (*sdk.ClientSession, error) {
	tr := &sdk.StreamableClientTransport{Endpoint: e.mcpURL(ws), HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, tr, nil)
	if err == nil {
		e.t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// initialize posts an MCP initialize request and returns the response.
func (e *env) initialize(ws string, header http.Header) *http.Response {
	e.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	req, _ := http.NewRequest(http.MethodPost, e.mcpURL(ws), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestMCPEndpointRefusesMissingBadAndOtherWorkspaceTokens(t *testing.T) {
	e := newEnv(t, withMCP)
	for name, c := range map[string]struct {
		token  string
		status int
		code   string
	}{
		"missing":         {"", http.StatusUnauthorized, protocol.CodeUnauthorized},
		"invalid":         {"not-a-token", http.StatusUnauthorized, protocol.CodeUnauthorized},
		"bridge role":     {e.token(auth.RoleBridge, "ws1"), http.StatusForbidden, protocol.CodeForbidden},
		"other workspace": {e.token(auth.RoleCaller, "ws2"), http.StatusForbidden, protocol.CodeForbidden},
	} {
		h := http.Header{}
		if c.token != "" {
			h.Set("Authorization", "Bearer "+c.token)
		}
		res := e.initialize("ws1", h)
		var resp protocol.ToolResponse
		_ = json.NewDecoder(res.Body).Decode(&resp)
		if res.StatusCode != c.status || resp.Error != c.code {
			t.Errorf("%s: HTTP %d %+v, want %d %s", name, res.StatusCode, resp, c.status, c.code)
		}
		if c.status == http.StatusUnauthorized && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: no WWW-Authenticate challenge", name)
		}
	}
	if res := e.initialize("ws1", http.Header{"Authorization": {"Bearer " + e.token(auth.RoleCaller, "ws1")}}); res.StatusCode != http.StatusOK {
		t.Fatalf("a good token: HTTP %d", res.StatusCode)
	}
}

func TestMCPEndpointRefusesAForeignHostOnLoopback(t *testing.T) {
	e := newEnv(t, withMCP)
	req, _ := http.NewRequest(http.MethodPost, e.mcpURL("ws1"), strings.NewReader(`{}`))
	req.Host = "attacker.example:80"
	req.Header.Set("Authorization", "Bearer "+e.token(auth.RoleCaller, "ws1"))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("HTTP %d for a rebinding Host, want 403", res.StatusCode)
	}
}

func TestMCPToolCallReachesTheWorkspaceAndCancelReachesIt(t *testing.T) {
	e := newEnv(t, withMCP)
	c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	cs, err := e.mcpClient("ws1", e.token(auth.RoleCaller, "ws1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(ctx, &sdk.CallToolParams{Name: "debug_sessions", Arguments: map[string]any{}})
		done <- res
	}()
	r := c.nextCall()
	if r.call.Endpoint != "/api/debug/list-sessions" {
		t.Fatalf("workspace received %+v", r.call)
	}
	c.ackOK(r, `{"sessions":[{"session_id":"dbg-7","adapter":"lldb-dap","request":"launch","state":"stopped","started_at":"2026-01-01T00:00:00Z"}]}`)
	res := <-done
	if res == nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "dbg-7") {
		t.Fatalf("result %+v", res)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := cs.CallTool(cctx, &sdk.CallToolParams{Name: "terminal_run", Arguments: map[string]any{"command": "sleep 100", "timeout_s": 100}})
		done <- &sdk.CallToolResult{IsError: err != nil}
	}()
	r = c.nextCall()
	cancel()
	c.wantCancel(r.call.CorrelationID)
	<-done
}

func TestMCPSessionBelongsToItsWorkspace(t *testing.T) {
	e := newEnv(t, withMCP)
	tok := e.token(auth.RoleCaller, "*")
	res := e.initialize("ws1", http.Header{"Authorization": {"Bearer " + tok}})
	sid := res.Header.Get("Mcp-Session-Id")
	if res.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d, session %q", res.StatusCode, sid)
	}
	req, _ := http.NewRequest(http.MethodPost, e.mcpURL("ws2"), strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	other, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	other.Body.Close()
	if other.StatusCode != http.StatusNotFound {
		t.Fatalf("ws1's session under ws2: HTTP %d, want 404", other.StatusCode)
	}
}

func TestMCPSeveralSessionsAtOnceAndShutdownEndsThem(t *testing.T) {
	e := newEnv(t, withMCP)
	tok := e.token(auth.RoleCaller, "ws1")
	var sessions []*sdk.ClientSession
	for range 3 {
		cs, err := e.mcpClient("ws1", tok)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
	}
	for _, cs := range sessions {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(res.Tools) < 20 {
			t.Fatalf("list: %v %v", err, res)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.broker.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The HTTP server's shutdown waits for requests in progress: the
	// sessions' event streams must have ended.
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("http shutdown: %v after %s", err, time.Since(start))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("shutdown took %s", took)
	}
	for _, cs := range sessions {
		if _, err := cs.ListTools(context.Background(), nil); err == nil {
			t.Error("a session still answers after shutdown")
		}
	}
}

// withMCP mounts package mcp's endpoint, as the command does.
func withMCP(c *broker.Config) {
	c.MCP = func(call api.Caller) api.Mount {
		return mcp.NewEndpoint(mcp.EndpointOptions{Caller: call, MaxRequestBody: 1_000_000 + 64<<10, Logger: c.Logger})
	}
}
