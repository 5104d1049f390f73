package e2e_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/revoke"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// The revocation tests (issue 29, part 3): an admin revokes a token (by
// jti) or a workspace's tokens issued before a time on one broker; every
// broker on the Redis refuses it within a second and ends the sockets and
// MCP sessions that authenticated with it.

// revocationBound is the promise: a revocation is in effect everywhere,
// and what authenticated with the token is closed, within it.
const revocationBound = time.Second

// jtiOf is the jti of a token the tests minted.
func jtiOf(t *testing.T, tok string) string {
	t.Helper()
	var claims auth.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &claims); err != nil || claims.ID == "" {
		t.Fatalf("no jti in token: %v", err)
	}
	return claims.ID
}

// tokenIssuedAt mints a token as IssueToken does, with the iat given: for
// the side of an issued_before a test needs it on.
func tokenIssuedAt(t *testing.T, role string, iat time.Time, ws ...string) string {
	t.Helper()
	claims := auth.Claims{Role: role, Workspaces: ws, RegisteredClaims: jwt.RegisteredClaims{
		IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(iat.Add(time.Hour)), Issuer: "tether", ID: uuid.NewString(),
	}}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// admin sends a request to the broker's revocations route with tok and
// returns the status and the answer.
func (b *brokerProc) admin(method, tok, body string) (int, []byte) {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.url+"/api/v1/admin/revocations", strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s revocations on %s: %v", method, b.name, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, raw
}

// revoke POSTs a revocation as an admin; it must be made (201).
func (b *brokerProc) revoke(body string) revoke.Entry {
	b.t.Helper()
	status, raw := b.admin(http.MethodPost, token(b.t, auth.RoleAdmin), body)
	var e revoke.Entry
	if status != http.StatusCreated || json.Unmarshal(raw, &e) != nil {
		b.t.Fatalf("POST revocation %s on %s: %d %s", body, b.name, status, raw)
	}
	return e
}

// revocations lists the broker's revocations in effect.
func (b *brokerProc) revocations() []revoke.Entry {
	b.t.Helper()
	status, raw := b.admin(http.MethodGet, token(b.t, auth.RoleAdmin), "")
	var list struct {
		Revocations []revoke.Entry `json:"revocations"`
	}
	if status != http.StatusOK || json.Unmarshal(raw, &list) != nil {
		b.t.Fatalf("GET revocations on %s: %d %s", b.name, status, raw)
	}
	return list.Revocations
}

// refusedRevoked checks that a call with tok is refused 401 "token revoked".
func (b *brokerProc) refusedRevoked(ws, tok string) {
	b.t.Helper()
	r := b.call(ws, tok, `{"endpoint":"/api/ping","timeout":5}`)
	if r.err != nil || r.status != http.StatusUnauthorized || r.resp.Error != protocol.CodeUnauthorized || r.resp.Message != "token revoked" {
		b.t.Fatalf("call on %s with a revoked token: %v %d %+v, want 401 unauthorized \"token revoked\"", b.name, r.err, r.status, r.resp)
	}
}

// awaitDisconnect waits for the client's disconnect and returns how long
// after since it came.
func (c *ideClient) awaitDisconnect(since time.Time, within time.Duration) time.Duration {
	c.t.Helper()
	c.await("disconnect", within)
	took := time.Since(since)
	c.t.Logf("socket closed %s after the revocation was sent", took.Round(time.Millisecond))
	return took
}

// ideRefusedRevoked checks that a socket.io-client with tok is refused at
// CONNECT because the token is revoked.
func ideRefusedRevoked(t *testing.T, b *brokerProc, ws, tok string) {
	t.Helper()
	c, first := startIDE(t, b, ws, tok, "ack")
	defer c.kill()
	if first["event"] != "connect_error" || first["message"] != "token revoked" {
		t.Fatalf("CONNECT on %s with a revoked token: %v, want connect_error \"token revoked\"", b.name, first)
	}
}

func TestRevocationByJTIOnOneBrokerClosesTheSocketOnAnotherWithinASecond(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	const ws = "ws-revoke-jti"
	bridgeTok := token(t, auth.RoleBridge, ws)
	ide, first := startIDE(t, b, ws, bridgeTok, "none")
	if first["event"] != "connected" {
		t.Fatalf("socket.io-client did not connect: %v", first)
	}
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "b holding %s", ws)
	// A call in flight on the socket when it is revoked gets its one
	// answer: the disconnect's.
	callerTok := token(t, auth.RoleCaller, ws)
	pending := a.goCall(ws, callerTok, `{"endpoint":"/api/slow","timeout":20}`)
	ide.await("tool_call", 10*time.Second)

	start := time.Now()
	entry := a.revoke(`{"jti":"` + jtiOf(t, bridgeTok) + `"}`)
	if took := ide.awaitDisconnect(start, 5*time.Second); took > revocationBound {
		t.Fatalf("the revoked bridge's socket on b closed %s after the revocation on a, want within %s", took, revocationBound)
	}
	if entry.JTI != jtiOf(t, bridgeTok) || entry.By == "" || !entry.ExpiresAt.After(time.Now()) {
		t.Fatalf("entry = %+v", entry)
	}
	r := await(t, pending, 5*time.Second)
	if r.resp.Error != protocol.CodeWorkspaceDisconnected || !strings.Contains(r.resp.Message, "token revoked") {
		t.Fatalf("call pending on the revoked socket: %d %+v, want workspace_disconnected naming the revocation", r.status, r.resp)
	}
	b.waitLine(time.Second, "connection closed", `"reason":"token revoked"`)
	for _, via := range []*brokerProc{a, b} {
		ideRefusedRevoked(t, via, ws, bridgeTok)
		if list := via.revocations(); len(list) != 1 || list[0].JTI != entry.JTI {
			t.Fatalf("revocations on %s: %+v, want the one entry", via.name, list)
		}
	}

	// A caller token likewise, on both brokers; another token is served.
	connectIDE(t, b, ws, "ack")
	a.revoke(`{"jti":"` + jtiOf(t, callerTok) + `"}`)
	testwait.Until(t, revocationBound, func() bool {
		return b.call(ws, callerTok, `{"endpoint":"/api/ping","timeout":5}`).status == http.StatusUnauthorized
	}, "b refusing the revoked caller token")
	a.refusedRevoked(ws, callerTok)
	b.refusedRevoked(ws, callerTok)
	if r := b.call(ws, token(t, auth.RoleCaller, ws), `{"endpoint":"/api/ping","timeout":5}`); r.status != http.StatusOK || !r.resp.Success {
		t.Fatalf("a token not revoked: %d %+v", r.status, r.resp)
	}
}

func TestRevocationByWorkspaceIssuedBeforeAcrossTwoBrokers(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	const ws = "ws-revoke-cut"
	cut := time.Now().Truncate(time.Second)
	old := tokenIssuedAt(t, auth.RoleBridge, cut.Add(-time.Minute), ws)
	fresh := tokenIssuedAt(t, auth.RoleBridge, cut, ws) // iat == cut: not before it
	oldCaller := tokenIssuedAt(t, auth.RoleCaller, cut.Add(-time.Minute), ws)
	otherWS := tokenIssuedAt(t, auth.RoleBridge, cut.Add(-time.Minute), "ws-other")
	ide, first := startIDE(t, b, ws, old, "ack")
	if first["event"] != "connected" {
		t.Fatalf("socket.io-client did not connect: %v", first)
	}
	_, first = startIDE(t, b, "ws-other", otherWS, "ack")
	if first["event"] != "connected" {
		t.Fatalf("socket.io-client of ws-other did not connect: %v", first)
	}

	start := time.Now()
	entry := a.revoke(`{"workspace_id":"` + ws + `","issued_before":"` + cut.Format(time.RFC3339) + `"}`)
	if took := ide.awaitDisconnect(start, 5*time.Second); took > revocationBound {
		t.Fatalf("the socket of a token issued before the cut closed %s after the revocation, want within %s", took, revocationBound)
	}
	if entry.WorkspaceID != ws || entry.IssuedBefore == nil || !entry.IssuedBefore.Equal(cut) || !entry.ExpiresAt.Equal(cut.Add(revoke.DefaultMaxTokenTTL)) {
		t.Fatalf("entry = %+v", entry)
	}
	for _, via := range []*brokerProc{a, b} {
		ideRefusedRevoked(t, via, ws, old)
		via.refusedRevoked(ws, oldCaller)
	}
	// A token issued at the cut, and another workspace's, are served.
	ideNew, first := startIDE(t, a, ws, fresh, "ack")
	if first["event"] != "connected" {
		t.Fatalf("a token issued at the cut was refused: %v", first)
	}
	ideNew.kill()
	if r := b.call("ws-other", token(t, auth.RoleCaller, "ws-other"), `{"endpoint":"/api/ping","timeout":5}`); r.status != http.StatusOK || !r.resp.Success {
		t.Fatalf("ws-other's socket was touched by ws's revocation: %d %+v", r.status, r.resp)
	}
}

func TestRevocationOnABrokerAloneClosesTheSocketWithinASecond(t *testing.T) {
	b := startBroker(t)
	const ws = "ws-revoke-alone"
	bridgeTok := token(t, auth.RoleBridge, ws)
	ide, first := startIDE(t, b, ws, bridgeTok, "ack")
	if first["event"] != "connected" {
		t.Fatalf("socket.io-client did not connect: %v", first)
	}
	callerTok := token(t, auth.RoleCaller, ws)
	if r := b.call(ws, callerTok, `{"endpoint":"/api/ping","timeout":5}`); r.status != http.StatusOK {
		t.Fatalf("call before the revocation: %d %+v", r.status, r.resp)
	}
	start := time.Now()
	b.revoke(`{"jti":"` + jtiOf(t, bridgeTok) + `"}`)
	if took := ide.awaitDisconnect(start, 5*time.Second); took > revocationBound {
		t.Fatalf("socket closed %s after the revocation, want within %s", took, revocationBound)
	}
	ideRefusedRevoked(t, b, ws, bridgeTok)
	b.revoke(`{"jti":"` + jtiOf(t, callerTok) + `"}`)
	b.refusedRevoked(ws, callerTok)
	if n := len(b.revocations()); n != 2 {
		t.Fatalf("%d revocations listed, want 2", n)
	}
}

func TestBrokerStartedAfterARevocationRefusesTheToken(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	const ws = "ws-revoke-late"
	bridgeTok := token(t, auth.RoleBridge, ws)
	callerTok := token(t, auth.RoleCaller, ws)
	a.revoke(`{"jti":"` + jtiOf(t, bridgeTok) + `"}`)
	a.revoke(`{"jti":"` + jtiOf(t, callerTok) + `"}`)
	c := e.broker("c")
	c.refusedRevoked(ws, callerTok)
	ideRefusedRevoked(t, c, ws, bridgeTok)
	if n := len(c.revocations()); n != 2 {
		t.Fatalf("the later broker lists %d revocations, want 2", n)
	}
}

func TestRevocationRoutesNeedTheAdminRole(t *testing.T) {
	b := startBroker(t)
	body := `{"jti":"x"}`
	for _, tc := range []struct {
		name, method, tok, body string
		status                  int
		code, in                string
	}{
		{"caller token", http.MethodPost, token(t, auth.RoleCaller, "*"), body, http.StatusForbidden, protocol.CodeForbidden, "admin"},
		{"bridge token", http.MethodPost, token(t, auth.RoleBridge, "w"), body, http.StatusForbidden, protocol.CodeForbidden, "admin"},
		{"caller token lists", http.MethodGet, token(t, auth.RoleCaller, "*"), "", http.StatusForbidden, protocol.CodeForbidden, "admin"},
		{"no token", http.MethodPost, "", body, http.StatusUnauthorized, protocol.CodeUnauthorized, "missing token"},
		{"bad token", http.MethodGet, "not-a-token", "", http.StatusUnauthorized, protocol.CodeUnauthorized, "invalid token"},
		{"unknown field", http.MethodPost, token(t, auth.RoleAdmin), `{"jti":"x","why":"leak"}`, http.StatusBadRequest, protocol.CodeInvalidRequest, `"why"`},
		{"malformed time", http.MethodPost, token(t, auth.RoleAdmin), `{"workspace_id":"w","issued_before":"monday"}`, http.StatusBadRequest, protocol.CodeInvalidRequest, "issued_before"},
		{"both forms", http.MethodPost, token(t, auth.RoleAdmin), `{"jti":"x","workspace_id":"w","issued_before":"2026-01-01T00:00:00Z"}`, http.StatusBadRequest, protocol.CodeInvalidRequest, "jti"},
	} {
		status, raw := b.admin(tc.method, tc.tok, tc.body)
		var resp protocol.ToolResponse
		_ = json.Unmarshal(raw, &resp)
		if status != tc.status || resp.Error != tc.code || !strings.Contains(resp.Message, tc.in) {
			t.Errorf("%s: %d %s, want %d %s naming %s", tc.name, status, raw, tc.status, tc.code, tc.in)
		}
		if tc.tok != "" && strings.Contains(string(raw), tc.tok) {
			t.Errorf("%s: the answer echoes the token", tc.name)
		}
	}
	if n := len(b.revocations()); n != 0 {
		t.Fatalf("%d revocations after refused requests", n)
	}
}

// rawMCPSession opens an MCP session on the broker's endpoint with tok, as
// any streamable HTTP client does, and with stream its event stream (GET);
// ended is closed when the stream ends (nil without one).
func rawMCPSession(t *testing.T, b *brokerProc, ws, tok string, stream bool) (sid string, ended <-chan struct{}) {
	t.Helper()
	url := b.url + "/api/v1/workspaces/" + ws + "/mcp"
	post := func(sid, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	res := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if sid = res.Header.Get("Mcp-Session-Id"); res.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", res.StatusCode, sid)
	}
	if res := post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); res.StatusCode/100 != 2 {
		t.Fatalf("initialized: %d", res.StatusCode)
	}
	if !stream {
		return sid, nil
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	events, err := http.DefaultClient.Do(req)
	if err != nil || events.StatusCode != http.StatusOK {
		t.Fatalf("GET event stream: %v %v", err, events)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, bufio.NewReader(events.Body))
	}()
	t.Cleanup(func() {
		events.Body.Close()
		<-done
	})
	return sid, done
}

// mcpListTools sends tools/list on MCP session sid with tok and returns
// the status.
func mcpListTools(t *testing.T, b *brokerProc, ws, tok, sid string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.url+"/api/v1/workspaces/"+ws+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestRevocationClosesTheMCPSessionsOfTheToken(t *testing.T) {
	w := startMCPWorkspace(t, map[string]string{"a.txt": "hello\n"})
	tok := token(t, auth.RoleCaller, w.ws)
	// The official TypeScript SDK client, and a session whose event
	// stream is watched.
	sdkClient := connectMCP(t, "--url", w.b.url+"/api/v1/workspaces/"+w.ws+"/mcp", "--token", tok)
	sdkClient.list()
	sid, ended := rawMCPSession(t, w.b, w.ws, tok, true)
	idle, _ := rawMCPSession(t, w.b, w.ws, tok, false)                // nothing in flight when the token is revoked
	kept := connectMCP(t, mcpTransports(w.b, w.ws, w.tok)["http"]...) // another token's session

	start := time.Now()
	w.b.revoke(`{"jti":"` + jtiOf(t, tok) + `"}`)
	select {
	case <-ended:
		took := time.Since(start)
		t.Logf("MCP event stream ended %s after the revocation was sent", took.Round(time.Millisecond))
		if took > revocationBound {
			t.Fatalf("the MCP event stream ended %s after the revocation, want within %s", took, revocationBound)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the MCP event stream of a revoked token stayed open")
	}
	// The session is gone: even a good token cannot use its id. The idle
	// one is refused at its next request, and gone from then on.
	if status := mcpListTools(t, w.b, w.ws, w.tok, sid); status != http.StatusNotFound {
		t.Fatalf("a request on the closed session: %d, want 404 (no such session)", status)
	}
	if status := mcpListTools(t, w.b, w.ws, tok, idle); status != http.StatusUnauthorized {
		t.Fatalf("a request with the revoked token: %d, want 401", status)
	}
	if status := mcpListTools(t, w.b, w.ws, w.tok, idle); status != http.StatusNotFound {
		t.Fatalf("a request on the idle session after its token's refusal: %d, want 404 (no such session)", status)
	}
	// The SDK client's next call is refused; the other token's session serves.
	if r := sdkClient.call("file_read", map[string]any{"path": "a.txt"}); r.Err == "" {
		t.Fatalf("a tool call on the revoked token's session succeeded: %+v", r)
	}
	kept.ok("file_read", map[string]any{"path": "a.txt"}, nil)
}

// TestRevocationMissedWhileCutOffFromRedisTakesEffectOnReconnect: B's
// pub/sub connection goes silently dead, so B does not hear a revocation
// made on A; once B notices and resubscribes it reloads the list, closes
// the revoked bridge's socket and refuses the revoked caller token.
func TestRevocationMissedWhileCutOffFromRedisTakesEffectOnReconnect(t *testing.T) {
	e := newRedisEnv(t)
	proxy := redistest.StartProxy(t, e.srv.Addr())
	a := e.broker("a")
	b := startNamedBroker(t, "broker b", nil, "--instance-id", "b", "--redis", proxy.URL(), "--redis-prefix", e.prefix)
	const ws = "ws-revoke-missed"
	bridgeTok := token(t, auth.RoleBridge, ws)
	callerTok := token(t, auth.RoleCaller, ws)
	ide, first := startIDE(t, b, ws, bridgeTok, "ack")
	if first["event"] != "connected" {
		t.Fatalf("socket.io-client did not connect: %v", first)
	}
	if n := proxy.BlackholeSubscribers(); n != 1 {
		t.Fatalf("black-holed %d connections, want B's pub/sub connection", n)
	}
	a.revoke(`{"jti":"` + jtiOf(t, bridgeTok) + `"}`)
	a.revoke(`{"jti":"` + jtiOf(t, callerTok) + `"}`)
	ide.await("disconnect", 20*time.Second)
	b.waitLine(time.Second, "revocations reloaded")
	b.refusedRevoked(ws, callerTok)
	ideRefusedRevoked(t, b, ws, bridgeTok)
}

// TestRevokeCommand: `tether revoke` revokes by jti and by workspace, lists,
// and exits 1 when the broker refuses (no admin role), 2 on bad usage.
func TestRevokeCommand(t *testing.T) {
	b := startBroker(t)
	run := func(args ...string) (int, string) {
		t.Helper()
		var out strings.Builder
		cmd := exec.Command(tetherBin, append([]string{"revoke", "--broker", b.url}, args...)...)
		cmd.Stdout = &out
		return exitCode(t, cmd), out.String()
	}
	admin := token(t, auth.RoleAdmin)
	callerTok := token(t, auth.RoleCaller, "w")
	if code, out := run("--token", admin, "--jti", jtiOf(t, callerTok)); code != 0 || !strings.Contains(out, jtiOf(t, callerTok)) {
		t.Fatalf("revoke --jti: exit %d, %s", code, out)
	}
	b.refusedRevoked("w", callerTok)
	if code, out := run("--token", admin, "--workspace", "w2", "--issued-before", "now"); code != 0 || !strings.Contains(out, `"workspace_id": "w2"`) {
		t.Fatalf("revoke --workspace --issued-before now: exit %d, %s", code, out)
	}
	code, out := run("--token", admin, "--list")
	var list struct {
		Revocations []revoke.Entry `json:"revocations"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Revocations) != 2 {
		t.Fatalf("revoke --list: exit %d, %s", code, out)
	}
	if code, out := run("--token", callerTok, "--list"); code != 1 || !strings.Contains(out, protocol.CodeUnauthorized) {
		t.Fatalf("revoke --list with a revoked caller token: exit %d, %s, want 1 and unauthorized", code, out)
	}
	if code, out := run("--token", token(t, auth.RoleCaller, "w"), "--list"); code != 1 || !strings.Contains(out, protocol.CodeForbidden) {
		t.Fatalf("revoke --list with a caller token: exit %d, %s, want 1 and forbidden", code, out)
	}
	for _, bad := range [][]string{{"--token", admin}, {"--token", admin, "--jti", "x", "--list"}, {"--token", admin, "--workspace", "w"}} {
		if code, _ := run(bad...); code != 2 {
			t.Errorf("revoke %v: exit %d, want 2 (usage)", bad, code)
		}
	}
}

// TestCallInFlightWhenItsCallerTokenIsRevokedGetsItsAnswer: a call accepted
// before its caller token was revoked finishes with the workspace's answer
// (it was authorised when it began); the next call with the token is
// refused.
func TestCallInFlightWhenItsCallerTokenIsRevokedGetsItsAnswer(t *testing.T) {
	b := startBroker(t)
	const ws = "ws-revoke-inflight"
	ide := connectIDE(t, b, ws, "none")
	callerTok := token(t, auth.RoleCaller, ws)
	pending := b.goCall(ws, callerTok, `{"endpoint":"/api/ping","payload":{"n":1},"timeout":10}`)
	call := ide.await("tool_call", 5*time.Second)
	b.revoke(`{"jti":"` + jtiOf(t, callerTok) + `"}`)
	ide.send(map[string]any{"cmd": "answer", "correlation_id": call["correlation_id"], "via": "ack"})
	if r := await(t, pending, 5*time.Second); r.status != http.StatusOK || !r.resp.Success {
		t.Fatalf("the call in flight: %d %+v, want its answer", r.status, r.resp)
	}
	b.refusedRevoked(ws, callerTok)
}

// TestTokenLivingPastTheMaxTokenTTLIsRefused: a revocation must be able to
// end, so a token that lives longer than --max-token-ttl is refused as
// revoked, at the HTTP API and at CONNECT.
func TestTokenLivingPastTheMaxTokenTTLIsRefused(t *testing.T) {
	b := startBroker(t, "--max-token-ttl", "2h")
	const ws = "ws-long-token"
	long := func(role string) string {
		tok, err := auth.IssueToken([]byte(secret), role, []string{ws}, 3*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ideRefusedRevoked(t, b, ws, long(auth.RoleBridge))
	connectIDE(t, b, ws, "ack") // an hour's token is served
	b.refusedRevoked(ws, long(auth.RoleCaller))
	if r := b.call(ws, token(t, auth.RoleCaller, ws), `{"endpoint":"/api/ping","timeout":5}`); r.status != http.StatusOK {
		t.Fatalf("an hour's caller token: %d %+v", r.status, r.resp)
	}
}

// TestRevocationAcrossBrokersOnARedisCluster: the list is shared on a
// Cluster too (sharded pub/sub): a revocation on A closes B's socket
// within a second, and a broker started later refuses the token.
func TestRevocationAcrossBrokersOnARedisCluster(t *testing.T) {
	e := newClusterEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	const ws = "ws-revoke-cluster"
	bridgeTok := token(t, auth.RoleBridge, ws)
	ide, first := startIDE(t, b, ws, bridgeTok, "ack")
	if first["event"] != "connected" {
		t.Fatalf("socket.io-client did not connect: %v", first)
	}
	start := time.Now()
	a.revoke(`{"jti":"` + jtiOf(t, bridgeTok) + `"}`)
	if took := ide.awaitDisconnect(start, 5*time.Second); took > revocationBound {
		t.Fatalf("the socket on b closed %s after the revocation on a, want within %s", took, revocationBound)
	}
	ideRefusedRevoked(t, e.broker("c"), ws, bridgeTok)
}
