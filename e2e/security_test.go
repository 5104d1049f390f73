package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// The security suite: who may reach what, and what bad input does to
// everyone else. Every case runs against real broker and bridge processes
// (`go test -run TestSecurity ./e2e/`). The cases and where they are:
//
//	tokens on CONNECT and on the caller API: bad signature, expired,
//	  not yet valid (nbf), alg none, HS512, garbage, missing, wrong role
//	  both ways, another workspace, a bridge token for '*'
//	                                   TestSecurityTokensOnConnect, TestSecurityTokensOnTheCallerAPI
//	a bridge cannot answer, cancel or read another workspace's calls,
//	  sync and async (nor read or cancel an async one over the API)
//	                                   TestSecurityABridgeCannotTouchAnotherWorkspacesCalls,
//	                                   TestSecurityABridgeCannotTouchAnotherWorkspacesAsyncCalls
//	oversized frames, 100k-deep JSON in a frame and in HTTP bodies,
//	  floods of small frames (WebSocket and polling), invalid UTF-8:
//	  refused, and a second client keeps getting answers meanwhile
//	                                   TestSecurityBadInputHarmsNoOtherConnection
//	a connection flood from one address is limited (429), others are not
//	                                   TestSecurityConnectionFloodIsLimitedPerAddress
//	path traversal on /api/workspace/* and /api/sandbox/workspaces/{id}/*
//	                                   TestSecurityPathTraversal
//	no secret or token in any log line TestSecurityNoSecretOrTokenInLogs
//	the bridge's loopback HTTP listener refuses a foreign Host and Origin
//	                                   TestSecurityBridgeHTTPListenerRefusesForeignRequests
//	  and non-loopback peers: bridge/http_local_test.go
//	  TestHTTPHandlerRefusesARemoteClient (servers here listen on
//	  loopback only, so no such peer can be made from a test)
//	and a local request without the listener's token, a broker without
//	  keys, CORS, trusted proxies, /readyz in a drain: doors_test.go
//
// Related cases elsewhere: malformed packets close only their connection
// (broker_test.go TestMalformedPacketClosesOnlyThatConnection), HTTP
// bodies over --max-payload are refused (TestPayloadOverMaxPayloadRefused),
// payload fields are strict (bridge/strict_test.go).

func signedToken(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// badTokens are tokens the broker must refuse for role on workspace ws,
// with the code each gets.
func badTokens(t *testing.T, role, other, ws string) map[string]struct{ tok, code string } {
	exp := time.Now().Add(time.Hour).Unix()
	claims := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"role": role, "workspaces": []string{ws}, "exp": exp}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	return map[string]struct{ tok, code string }{
		"bad signature":   {signedToken(t, jwt.SigningMethodHS256, []byte("wrong-secret"), claims(nil)), protocol.CodeUnauthorized},
		"expired":         {signedToken(t, jwt.SigningMethodHS256, []byte(secret), claims(jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()})), protocol.CodeUnauthorized},
		"not yet valid":   {signedToken(t, jwt.SigningMethodHS256, []byte(secret), claims(jwt.MapClaims{"nbf": time.Now().Add(time.Hour).Unix()})), protocol.CodeUnauthorized},
		"no expiry":       {signedToken(t, jwt.SigningMethodHS256, []byte(secret), jwt.MapClaims{"role": role, "workspaces": []string{ws}}), protocol.CodeUnauthorized},
		"alg none":        {signedToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil)), protocol.CodeUnauthorized},
		"HS512":           {signedToken(t, jwt.SigningMethodHS512, []byte(secret), claims(nil)), protocol.CodeUnauthorized},
		"garbage":         {"not.a.token", protocol.CodeUnauthorized},
		"missing":         {"", protocol.CodeUnauthorized},
		"other workspace": {token(t, role, other), protocol.CodeForbidden},
	}
}

func TestSecurityTokensOnConnect(t *testing.T) {
	b := startBroker(t)
	cases := badTokens(t, auth.RoleBridge, "ws-other", "ws-auth")
	cases["caller token as a bridge"] = struct{ tok, code string }{token(t, auth.RoleCaller, "ws-auth"), protocol.CodeForbidden}
	cases["bridge token for every workspace"] = struct{ tok, code string }{signedToken(t, jwt.SigningMethodHS256, []byte(secret),
		jwt.MapClaims{"role": "bridge", "workspaces": []string{"*"}, "exp": time.Now().Add(time.Hour).Unix()}), protocol.CodeForbidden}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The real socket.io-client, as an IDE extension connects.
			_, first := startIDE(t, b, "ws-auth", tc.tok, "ack")
			data, _ := first["data"].(map[string]any)
			if first["event"] != "connect_error" || data["code"] != tc.code {
				t.Fatalf("got %v, want connect_error %s", first, tc.code)
			}
		})
	}
	t.Run("bad token in the Authorization header", func(t *testing.T) {
		c := dialWire(t, b.url, "", http.Header{"Authorization": {"Bearer " + cases["bad signature"].tok}})
		if f := c.connect("", "ws-auth"); !strings.HasPrefix(f, "44{") || !strings.Contains(f, protocol.CodeUnauthorized) {
			t.Fatalf("CONNECT answered %q", f)
		}
	})
	if r := b.call("ws-auth", token(t, auth.RoleCaller, "ws-auth"), `{"endpoint":"/api/ping","timeout":1}`); r.resp.Error != protocol.CodeWorkspaceOffline {
		t.Fatalf("a refused client holds the workspace: %+v", r.resp)
	}
}

func TestSecurityTokensOnTheCallerAPI(t *testing.T) {
	b := startBroker(t)
	startBridge(t, b, "ws-api")
	status := map[string]int{protocol.CodeUnauthorized: http.StatusUnauthorized, protocol.CodeForbidden: http.StatusForbidden}
	cases := badTokens(t, auth.RoleCaller, "ws-other", "ws-api")
	cases["bridge token as a caller"] = struct{ tok, code string }{token(t, auth.RoleBridge, "ws-api"), protocol.CodeForbidden}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := b.call("ws-api", tc.tok, `{"endpoint":"/api/ping","payload":{"x":1},"timeout":5}`)
			if r.err != nil || r.status != status[tc.code] || r.resp.Error != tc.code || r.resp.Success {
				t.Fatalf("call: HTTP %d %+v %v, want %d %s", r.status, r.resp, r.err, status[tc.code], tc.code)
			}
			req, _ := http.NewRequest(http.MethodGet, b.url+"/api/v1/workspaces", nil)
			req.Header.Set("Authorization", "Bearer "+tc.tok)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			want := status[tc.code]
			if name == "other workspace" {
				want = http.StatusOK // a caller may list; it sees only its workspaces
				if strings.Contains(string(body), "ws-api") {
					t.Fatalf("a caller for another workspace sees ws-api: %s", body)
				}
			}
			if res.StatusCode != want {
				t.Fatalf("list: HTTP %d %s, want %d", res.StatusCode, body, want)
			}
		})
	}
	if r := b.call("ws-api", token(t, auth.RoleCaller, "ws-api"), `{"endpoint":"/api/ping","timeout":5}`); !r.resp.Success {
		t.Fatalf("the good token: %+v", r.resp)
	}
}

func TestSecurityABridgeCannotTouchAnotherWorkspacesCalls(t *testing.T) {
	b := startBroker(t)
	victim := dialWire(t, b.url, "", nil)
	if f := victim.connect(token(t, auth.RoleBridge, "ws-victim"), "ws-victim"); !strings.HasPrefix(f, `40{"sid"`) {
		t.Fatalf("victim CONNECT: %q", f)
	}
	forger := dialWire(t, b.url, "", nil)
	if f := forger.connect(token(t, auth.RoleBridge, "ws-forger"), "ws-forger"); !strings.HasPrefix(f, `40{"sid"`) {
		t.Fatalf("forger CONNECT: %q", f)
	}
	tok := token(t, auth.RoleCaller, "ws-victim")
	pending := b.goCall("ws-victim", tok, `{"endpoint":"/api/ping","payload":{"secret":"victim-data"},"timeout":5,"correlation_id":"victim-call-1"}`)
	frame := victim.nextMatching(5*time.Second, `"victim-call-1"`)
	ack := strings.TrimPrefix(strings.SplitN(frame, "[", 2)[0], "42")

	// Answer it: as an event with its correlation id, and as an ack with
	// the ack id the victim got (the forger's own ack ids are its own).
	forger.send(`42["tool_response",{"correlation_id":"victim-call-1","success":true,"result":"forged by event"}]`)
	forger.send(`43` + ack + `[{"correlation_id":"victim-call-1","success":true,"result":"forged by ack"}]`)
	// Cancel it: clients cannot cancel calls at all; the event is ignored.
	forger.send(`42["tool_cancel",{"correlation_id":"victim-call-1","reason":"forged"}]`)
	// The victim's own answer is the one the caller gets.
	victim.send(`43` + ack + `[{"correlation_id":"victim-call-1","success":true,"result":"from the victim"}]`)
	r := await(t, pending, 5*time.Second)
	if !r.resp.Success || string(r.resp.Result) != `"from the victim"` {
		t.Fatalf("the victim's call was answered %+v", r.resp)
	}
	// Read it: the forger never saw the call or its payload.
	for _, f := range forger.drain() {
		if strings.Contains(f, "victim") {
			t.Fatalf("the forger received %q", f)
		}
	}
	// Nor can it take the workspace over: its token is for ws-forger.
	thief := dialWire(t, b.url, "", nil)
	if f := thief.connect(token(t, auth.RoleBridge, "ws-forger"), "ws-victim"); !strings.Contains(f, protocol.CodeForbidden) {
		t.Fatalf("CONNECT as ws-victim with ws-forger's token: %q", f)
	}
	// Over the caller API with its own token, the forger's workspace is
	// all it can name.
	if r := b.call("ws-victim", token(t, auth.RoleCaller, "ws-forger"), `{"endpoint":"/api/ping","timeout":1}`); r.status != http.StatusForbidden {
		t.Fatalf("a caller token for ws-forger calling ws-victim: %d %+v", r.status, r.resp)
	}
	if n := b.metric("tether_unmatched_answers_total"); n < 2 {
		t.Fatalf("tether_unmatched_answers_total = %v, want the 2 forged answers counted", n)
	}
}

// TestSecurityABridgeCannotTouchAnotherWorkspacesAsyncCalls: the same for
// a durable async call. A bridge of another workspace cannot answer it (by
// event or by the victim's ack id) nor cancel it over the wire; neither its
// bridge token nor a caller token for its own workspace can read or cancel
// the call over the API (bridge tokens cannot use the caller API at all);
// the record keeps the victim's answer.
func TestSecurityABridgeCannotTouchAnotherWorkspacesAsyncCalls(t *testing.T) {
	b := startBroker(t)
	victim := dialWire(t, b.url, "", nil)
	if f := victim.connect(token(t, auth.RoleBridge, "ws-victim"), "ws-victim"); !strings.HasPrefix(f, `40{"sid"`) {
		t.Fatalf("victim CONNECT: %q", f)
	}
	forger := dialWire(t, b.url, "", nil)
	if f := forger.connect(token(t, auth.RoleBridge, "ws-forger"), "ws-forger"); !strings.HasPrefix(f, `40{"sid"`) {
		t.Fatalf("forger CONNECT: %q", f)
	}
	tok := token(t, auth.RoleCaller, "ws-victim")
	rec := b.submit("ws-victim", tok, `{"endpoint":"/api/ping","payload":{"secret":"victim-data"},"timeout":10,"async":true,"correlation_id":"victim-async-1"}`)
	cid := rec.CorrelationID
	frame := victim.nextMatching(5*time.Second, `"`+cid+`"`)
	ack := strings.TrimPrefix(strings.SplitN(frame, "[", 2)[0], "42")

	forger.send(`42["tool_response",{"correlation_id":"` + cid + `","success":true,"result":"forged by event"}]`)
	forger.send(`43` + ack + `[{"correlation_id":"` + cid + `","success":true,"result":"forged by ack"}]`)
	forger.send(`42["tool_cancel",{"correlation_id":"` + cid + `","reason":"forged"}]`)

	// Over the API: the forger's bridge token and its caller token.
	for _, c := range []struct{ name, tok string }{
		{"the forger's bridge token", token(t, auth.RoleBridge, "ws-forger")},
		{"a caller token for ws-forger", token(t, auth.RoleCaller, "ws-forger")},
	} {
		for _, req := range []struct{ method, path string }{
			{http.MethodGet, "/api/v1/calls/" + cid},
			{http.MethodGet, "/api/v1/calls/" + cid + "?wait=1"},
			{http.MethodPost, "/api/v1/calls/" + cid + "/cancel"},
		} {
			a := b.asyncRequest(req.method, req.path, c.tok, "")
			if a.status != http.StatusForbidden || a.fail.Error != protocol.CodeForbidden || strings.Contains(a.fail.Message, "victim-data") {
				t.Fatalf("%s %s with %s: HTTP %d %+v %+v; want 403 forbidden, nothing of the call", req.method, req.path, c.name, a.status, a.fail, a.rec)
			}
		}
	}

	// The victim's own answer is the call's outcome.
	victim.send(`43` + ack + `[{"correlation_id":"` + cid + `","success":true,"result":"from the victim"}]`)
	got := b.record(cid, tok, 10)
	wantSucceeded(t, got, `"from the victim"`)
	for _, f := range forger.drain() {
		if strings.Contains(f, "victim") {
			t.Fatalf("the forger received %q", f)
		}
	}
}

func TestSecurityBadInputHarmsNoOtherConnection(t *testing.T) {
	b := startBroker(t)
	startBridge(t, b, "ws-steady")
	bound := 2 * time.Second
	cases := []struct {
		name  string
		abuse func(t *testing.T)
	}{
		{"frame over maxPayload", func(t *testing.T) {
			c := connectedWire(t, b, "ws-big")
			_ = c.ws.Write(context.Background(), websocket.MessageText, []byte(`42["tool_response",{"x":"`+strings.Repeat("x", 1_000_001)+`"}]`))
			c.waitClosed(t, 5*time.Second)
		}},
		{"100k-deep JSON in a frame", func(t *testing.T) {
			c := connectedWire(t, b, "ws-deep")
			c.send(`42["tool_response",` + deep(100_000) + `]`)
			c.waitClosed(t, 5*time.Second)
		}},
		{"100k-deep JSON in the CONNECT auth", func(t *testing.T) {
			c := dialWire(t, b.url, "", nil)
			c.send(`40` + deep(100_000))
			c.waitClosed(t, 5*time.Second)
		}},
		{"100k-deep JSON in a caller's HTTP body", func(t *testing.T) {
			r := b.call("ws-steady", token(t, auth.RoleCaller, "ws-steady"), `{"endpoint":"/api/ping","payload":`+deep(100_000)+`}`)
			if r.status != http.StatusBadRequest || r.resp.Error != protocol.CodeInvalidRequest {
				t.Fatalf("got %d %+v, want 400 invalid_request", r.status, r.resp)
			}
		}},
		{"100k-deep JSON in a polling POST", func(t *testing.T) {
			sid := pollOpen(t, b.url)
			status, _ := pollPost(t, b.url, sid, `40{"token":"`+token(t, auth.RoleBridge, "ws-poll-deep")+`"}`+"\x1e"+`42["tool_response",`+deep(100_000)+`]`)
			if status != http.StatusOK {
				t.Fatalf("POST answered %d", status)
			}
			testwait.Until(t, 10*time.Second, func() bool { return pollClosed(b.url, sid) }, "the polling session to close")
		}},
		{"100,000 small frames", func(t *testing.T) {
			c := connectedWire(t, b, "ws-chatty")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for i := range 100_000 {
				if err := c.ws.Write(ctx, websocket.MessageText, []byte(`42["noise",`+fmt.Sprint(i)+`]`)); err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
			}
			// Still served afterwards: the frames were legal, only useless.
			pending := b.goCall("ws-chatty", token(t, auth.RoleCaller, "ws-chatty"), `{"endpoint":"/x","timeout":10,"correlation_id":"after-noise"}`)
			f := c.nextMatching(10*time.Second, `"after-noise"`)
			c.send(`43` + strings.TrimPrefix(strings.SplitN(f, "[", 2)[0], "42") + `[{"correlation_id":"after-noise","success":true,"result":1}]`)
			if r := await(t, pending, 10*time.Second); !r.resp.Success {
				t.Fatalf("after the flood the chatty client's call got %+v", r.resp)
			}
		}},
		{"500,000 packets in polling POSTs", func(t *testing.T) {
			sid := pollOpen(t, b.url)
			noise := strings.Repeat("3\x1e", 249_999) + "3"
			for range 2 {
				if status, body := pollPost(t, b.url, sid, noise); status != http.StatusOK {
					t.Fatalf("POST answered %d %s", status, body)
				}
			}
		}},
		{"invalid UTF-8 in a frame", func(t *testing.T) {
			c := connectedWire(t, b, "ws-utf8")
			pending := b.goCall("ws-utf8", token(t, auth.RoleCaller, "ws-utf8"), `{"endpoint":"/x","timeout":10,"correlation_id":"u1"}`)
			f := c.nextMatching(5*time.Second, `"u1"`)
			c.send(`43` + strings.TrimPrefix(strings.SplitN(f, "[", 2)[0], "42") + "[{\"correlation_id\":\"u1\",\"success\":true,\"result\":\"\xff\xfe\"}]")
			c.waitClosed(t, 5*time.Second)
			if r := await(t, pending, 5*time.Second); r.resp.Error != protocol.CodeWorkspaceDisconnected {
				t.Fatalf("the call answered with invalid UTF-8 got %+v, want workspace_disconnected", r.resp)
			}
		}},
		{"invalid UTF-8 in the CONNECT auth", func(t *testing.T) {
			c := dialWire(t, b.url, "", nil)
			c.send("40{\"token\":\"\xc3\x28\",\"workspace_id\":\"ws-x\"}")
			c.waitClosed(t, 5*time.Second)
		}},
		{"invalid UTF-8 in a caller's payload", func(t *testing.T) {
			r := b.call("ws-steady", token(t, auth.RoleCaller, "ws-steady"), "{\"endpoint\":\"/api/ping\",\"payload\":\"\xed\xa0\x80\"}")
			if r.status != http.StatusBadRequest || r.resp.Error != protocol.CodeInvalidRequest || !strings.Contains(r.resp.Message, "UTF-8") {
				t.Fatalf("got %d %+v, want 400 invalid_request about UTF-8", r.status, r.resp)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A quick abuse is repeated until the steady client has made a
			// few calls while it went on.
			s := startSteady(t, b, "ws-steady")
			until := time.Now().Add(5 * time.Second)
			for i := 0; i == 0 || (s.count() < 10 && time.Now().Before(until)); i++ {
				tc.abuse(t)
			}
			s.check(t, bound)
		})
	}
}

func TestSecurityConnectionFloodIsLimitedPerAddress(t *testing.T) {
	b := startBroker(t, "--limit-loopback", "--conn-rate", "5", "--conn-burst", "10", "--max-handshakes-per-ip", "1000")
	startBridge(t, b, "ws-steady")
	s := startSteady(t, b, "ws-steady")
	refused, admitted := 0, 0
	began := time.Now()
	for range 200 {
		status, retry, body := dialFrom(t, b.url, "127.0.0.2")
		switch status {
		case http.StatusSwitchingProtocols:
			admitted++
		case http.StatusTooManyRequests:
			refused++
			if retry == "" || !strings.Contains(body, `"code":4`) || !strings.Contains(body, "Too many connections") {
				t.Fatalf("refusal: Retry-After %q body %q", retry, body)
			}
		default:
			t.Fatalf("dial answered %d %s", status, body)
		}
	}
	// The burst and what the rate refilled meanwhile, no more.
	if most := 10 + int(5*time.Since(began).Seconds()) + 1; admitted < 10 || admitted > most || refused+admitted != 200 {
		t.Fatalf("admitted %d, refused %d of 200 in %s, want the burst of 10 and 5/s (at most %d)", admitted, refused, time.Since(began), most)
	}
	// Another address is not held up by that one's flood.
	if status, _, body := dialFrom(t, b.url, "127.0.0.3"); status != http.StatusSwitchingProtocols {
		t.Fatalf("another address: %d %s", status, body)
	}
	s.check(t, 2*time.Second)
	b.waitLine(5*time.Second, "refusing new connections from this address", `"remote_ip":"127.0.0.2"`)
	if n := countLines(b.proc, "refusing new connections from this address"); n != 1 {
		t.Fatalf("%d refusal lines for one burst, want 1", n)
	}
	if v := b.metric(`tether_connections_refused_total{limit="connection rate"}`); int(v) != refused {
		t.Fatalf("metric counts %v refusals, want %d", v, refused)
	}

	// Handshakes without CONNECT, on a broker without a rate limit.
	h := startBroker(t, "--limit-loopback", "--conn-rate", "0", "--max-handshakes-per-ip", "5")
	for range 5 {
		dialWire(t, h.url, "127.0.0.4", nil) // open, never CONNECTed
	}
	if status, _, body := dialFrom(t, h.url, "127.0.0.4"); status != http.StatusTooManyRequests || !strings.Contains(body, "handshakes") {
		t.Fatalf("a sixth handshake: %d %s, want 429", status, body)
	}
	if status, _, body := dialFrom(t, h.url, "127.0.0.5"); status != http.StatusSwitchingProtocols {
		t.Fatalf("another address: %d %s", status, body)
	}
}

func TestSecurityPathTraversal(t *testing.T) {
	root, outside := workspaceRepo(t) // root/out -> outside, holding secret.txt
	if err := os.Symlink("main.go", filepath.Join(root, "inside-link")); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t)
	startBridge(t, b, "ws-paths", "--root", root, "--sandbox-dir", t.TempDir())
	c := &routeCaller{t: t, b: b, ws: "ws-paths", tok: token(t, auth.RoleCaller, "ws-paths")}
	var acq acquired
	c.ok("/api/sandbox/workspaces", map[string]any{"repo": sandboxOrigin(t), "mode": "edit", "user_id": "u", "project_id": "p", "conversation_id": "paths"}, &acq)
	sbx := "/api/sandbox/workspaces/" + acq.WorkspaceID + "/"
	// The same two symlinks in the sandbox worktree: one out, one in.
	c.ok(sbx+"exec", map[string]any{"command": "ln -s '" + outside + "' out && ln -s main.go inside-link"}, nil)

	// Escapes: every operation refuses them with invalid_path.
	escapes := map[string]string{
		"dot-dot":                 "../" + filepath.Base(outside) + "/secret.txt",
		"dot-dot deep":            strings.Repeat("../", 40) + "etc/passwd",
		"dot-dot after a name":    "sub/../../secret.txt",
		"absolute outside":        filepath.Join(outside, "secret.txt"),
		"absolute /etc":           "/etc/passwd",
		"absolute inside":         filepath.Join(root, "main.go"),
		"through the symlink out": "out/secret.txt",
		"NUL":                     "main.go\x00/../../out/secret.txt",
		"NUL alone":               "\x00",
		"over 4096 bytes":         strings.Repeat("a/", 3000) + "x",
	}
	// Names that only look odd: inside the tree, so allowed, but nothing
	// reaches outside through them. Linux names are case-sensitive, and
	// neither %2e nor a backslash is a separator.
	odd := map[string]string{
		"case trick on the link": "OUT/secret.txt",
		"encoded dot-dot":        "%2e%2e/secret.txt",
		"backslashes":            `..\..\secret.txt`,
		"a name over 255 bytes":  strings.Repeat("n", 300),
	}
	payload := func(op, p string) map[string]any {
		m := map[string]any{"path": p}
		switch op {
		case "write-file":
			m["content"] = "planted"
		case "search":
			m["pattern"] = "TOPSECRET"
		case "str-replace":
			m["old"], m["new"] = "TOPSECRET", "changed"
		}
		return m
	}
	noLeak := func(t *testing.T, op, p string, resp protocol.ToolResponse) {
		t.Helper()
		if strings.Contains(resp.Message, "TOPSECRET") || strings.Contains(string(resp.Result), "TOPSECRET") {
			t.Fatalf("%s %q leaked the outside file: %+v", op, p, resp)
		}
	}
	ops := []string{"read-file", "stat", "exists", "list-dir", "readdir", "search", "str-replace", "write-file", "mkdir", "rm"}
	for _, base := range []string{"/api/workspace/", sbx} {
		for name, p := range escapes {
			t.Run(base+" "+name, func(t *testing.T) {
				for _, op := range ops {
					resp := c.call(base+op, payload(op, p))
					noLeak(t, op, p, resp)
					if resp.Success || resp.Error != protocol.CodeInvalidPath {
						t.Fatalf("%s %q: %+v, want invalid_path", op, p, resp)
					}
				}
			})
		}
		for name, p := range odd {
			t.Run(base+" "+name, func(t *testing.T) {
				for _, op := range ops {
					noLeak(t, op, p, c.call(base+op, payload(op, p)))
				}
			})
		}
		t.Run(base+" the symlink out is not followed", func(t *testing.T) {
			for _, op := range []string{"read-file", "list-dir", "readdir", "search"} {
				resp := c.call(base+op, payload(op, "out"))
				noLeak(t, op, "out", resp)
				if resp.Success || resp.Error != protocol.CodeInvalidPath {
					t.Fatalf("%s out: %+v, want invalid_path", op, resp)
				}
			}
		})
		t.Run(base+" a symlink inside is followed", func(t *testing.T) {
			var read struct{ Content string }
			c.ok(base+"read-file", map[string]any{"path": "inside-link"}, &read)
			if !strings.Contains(read.Content, "package main") {
				t.Fatalf("inside-link read %q", read.Content)
			}
		})
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the outside directory changed: %v %v", entries, err)
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(data) != "TOPSECRET\n" {
		t.Fatalf("the outside file changed: %q", data)
	}
}

func TestSecurityNoSecretOrTokenInLogs(t *testing.T) {
	const sandboxToken = "sandbox-auth-token-e2e-never-logged"
	const redisPassword = "redis-password-e2e-never-logged"
	// On Redis, with a password in its URL.
	r := newRedisEnv(t)
	rc := redis.NewClient(&redis.Options{Addr: r.srv.Addr()})
	if err := rc.ConfigSet(context.Background(), "requirepass", redisPassword).Err(); err != nil {
		t.Fatal(err)
	}
	_ = rc.Close()
	b := runBroker(t, "broker", "127.0.0.1:0", nil, "--redis", strings.Replace(r.srv.URL(), "redis://", "redis://:"+redisPassword+"@", 1), "--redis-prefix", r.prefix)
	bridgeTok := token(t, auth.RoleBridge, "ws-logs")
	root := t.TempDir()
	br := start(t, "bridge ws-logs", bridgeCmd(b, "ws-logs", bridgeTok, root, "--sandbox-dir", t.TempDir()))
	testwait.Until(t, 10*time.Second, func() bool { return b.holds("ws-logs") }, "%s holding ws-logs", b.name)
	callerTok := token(t, auth.RoleCaller, "ws-logs")
	used := []string{bridgeTok, callerTok}

	// Good calls, refused calls, a sandbox acquire carrying a token, bad
	// tokens on both sides: everything that could log a credential.
	c := &routeCaller{t: t, b: b, ws: "ws-logs", tok: callerTok}
	c.ok("/api/ping", map[string]any{"x": 1}, nil)
	c.ok("/api/terminal/execute", map[string]any{"command": "true", "hidden": true}, nil)
	c.call("/api/sandbox/workspaces", map[string]any{"repo": sandboxOrigin(t), "mode": "edit", "user_id": "u", "project_id": "p", "auth_token": sandboxToken})
	c.call("/api/terminal/execute", map[string]any{"comand": "true"})
	for name, tc := range badTokens(t, auth.RoleCaller, "ws-other", "ws-logs") {
		used = append(used, tc.tok)
		if r := b.call("ws-logs", tc.tok, `{"endpoint":"/api/ping"}`); r.resp.Success {
			t.Fatalf("%s: accepted", name)
		}
	}
	for name, tc := range badTokens(t, auth.RoleBridge, "ws-other", "ws-logs2") {
		used = append(used, tc.tok)
		w := dialWire(t, b.url, "", nil)
		if f := w.connect(tc.tok, "ws-logs2"); !strings.HasPrefix(f, "44") {
			t.Fatalf("%s: CONNECT answered %q", name, f)
		}
	}
	w := dialWire(t, b.url, "", http.Header{"Authorization": {"Bearer " + bridgeTok + "x"}})
	w.connect("", "ws-logs")
	used = append(used, bridgeTok+"x")

	// Stopping logs the last lines (drain, disconnects) too.
	br.stop(syscall.SIGTERM, 10*time.Second)
	b.stop(syscall.SIGTERM, 10*time.Second)
	logs := append(br.logLines(), b.logLines()...)
	all := strings.Join(logs, "\n")
	if len(logs) < 20 || !strings.Contains(all, `"correlation_id"`) || !strings.Contains(all, "routing through redis") {
		t.Fatalf("only %d log lines, without call and Redis events: the check below would prove nothing", len(logs))
	}
	for _, line := range logs {
		for _, s := range append(used, secret, sandboxToken, redisPassword) {
			if s == "" || len(s) < 8 {
				continue
			}
			if strings.Contains(line, s) || (strings.Count(s, ".") == 2 && strings.Contains(line, strings.SplitN(s, ".", 3)[2]) && len(strings.SplitN(s, ".", 3)[2]) > 8) {
				t.Fatalf("a log line holds a secret or token (%.12s…):\n%s", s, line)
			}
		}
		if strings.Contains(line, "Bearer ") {
			t.Fatalf("a log line holds an Authorization header:\n%s", line)
		}
	}
}

func TestSecurityBridgeHTTPListenerRefusesForeignRequests(t *testing.T) {
	b := startBroker(t)
	root := t.TempDir()
	br := startBridge(t, b, "ws-http", "--root", root, "--http", "127.0.0.1:0")
	var ev struct {
		Addr string `json:"addr"`
	}
	if err := json.Unmarshal([]byte(br.waitLine(10*time.Second, "http listener started")), &ev); err != nil || ev.Addr == "" {
		t.Fatal("no HTTP address in the bridge's log")
	}
	_, port, _ := net.SplitHostPort(ev.Addr)
	tok, err := bridge.ReadToken(ev.Addr)
	if err != nil {
		t.Fatal(err)
	}
	post := func(host, origin, body string) (int, protocol.ToolResponse) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ev.Addr+"/api/terminal/execute", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok) // refused for Host or Origin alone
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", "text/plain") // what a cross-site form may send
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var resp protocol.ToolResponse
		_ = json.NewDecoder(res.Body).Decode(&resp)
		return res.StatusCode, resp
	}
	planted := `{"command":"touch planted","hidden":true}`
	for name, tc := range map[string]struct{ host, origin string }{
		"foreign Host (DNS rebinding)":  {"attacker.example:" + port, ""},
		"foreign Host, no port":         {"attacker.example", ""},
		"loopback Host, another port":   {"127.0.0.1:1", ""},
		"foreign Origin":                {"", "https://evil.example"},
		"foreign Origin on the port":    {"", "http://evil.example:" + port},
		"another local server's Origin": {"", "http://localhost:3000"},
		"null Origin":                   {"", "null"},
	} {
		t.Run(name, func(t *testing.T) {
			status, resp := post(tc.host, tc.origin, planted)
			if status != http.StatusForbidden || resp.Error != protocol.CodeForbidden {
				t.Fatalf("HTTP %d %+v, want 403 forbidden", status, resp)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "planted")); err == nil {
		t.Fatal("a refused request ran its command")
	}
	t.Run("deep JSON in the body", func(t *testing.T) {
		status, resp := post("", "", `{"command":`+deep(100_000)+`}`)
		if status != http.StatusOK || resp.Error != protocol.CodeInvalidPayload {
			t.Fatalf("HTTP %d %+v, want 200 invalid_payload", status, resp)
		}
	})
	t.Run("a local request is served", func(t *testing.T) {
		status, resp := post("localhost:"+port, "http://localhost:"+port, `{"command":"echo ok","hidden":true}`)
		if status != http.StatusOK || !resp.Success {
			t.Fatalf("HTTP %d %+v", status, resp)
		}
	})
}
