package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// No unauthenticated local doors (issue 29): loopback is no trust
// boundary, so the bridge's local listener and a broker without keys both
// want a credential; and the doors browsers and balancers use.

// startLocalBridge runs `tether bridge --http` (no broker) with its own
// XDG_RUNTIME_DIR, and returns it with its listener's address and that
// directory.
func startLocalBridge(t *testing.T, root string) (p *proc, addr, runDir string) {
	t.Helper()
	runDir = filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(tetherBin, "bridge", "--http", "127.0.0.1:0", "--root", root, "--log-level", "debug")
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runDir)
	p = start(t, "bridge", cmd)
	var ev struct {
		Addr string `json:"addr"`
	}
	if err := json.Unmarshal([]byte(p.waitLine(10*time.Second, "http listener started")), &ev); err != nil || ev.Addr == "" {
		t.Fatal("no HTTP address in the bridge's log")
	}
	return p, ev.Addr, runDir
}

func postLocal(t *testing.T, addr, auth, body string) (int, protocol.ToolResponse) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+protocol.TerminalExecuteEndpoint, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var resp protocol.ToolResponse
	if err := json.NewDecoder(res.Body).Decode(&resp); err != nil {
		t.Fatalf("HTTP %d: not a ToolResponse: %v", res.StatusCode, err)
	}
	return res.StatusCode, resp
}

func TestDoorsBridgeListenerRefusesARequestWithoutItsToken(t *testing.T) {
	root := t.TempDir()
	_, addr, runDir := startLocalBridge(t, root)
	planted := `{"command":"touch planted","hidden":true}`
	for name, auth := range map[string]string{"no token": "", "wrong token": "Bearer guessed", "not bearer": "Basic eDp5"} {
		t.Run(name, func(t *testing.T) {
			status, resp := postLocal(t, addr, auth, planted)
			if status != http.StatusUnauthorized || resp.Error != protocol.CodeUnauthorized || resp.Message == "" {
				t.Fatalf("HTTP %d %+v, want 401 unauthorized with a message", status, resp)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "planted")); err == nil {
		t.Fatal("a request without the token ran its command")
	}
	path, err := bridge.TokenFile(filepath.Join(runDir, "tether"), addr)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the token file: %v", err)
	}
	status, resp := postLocal(t, addr, "Bearer "+strings.TrimSpace(string(raw)), `{"command":"echo ok","hidden":true}`)
	if status != http.StatusOK || !resp.Success {
		t.Fatalf("with the token: HTTP %d %+v, want a success", status, resp)
	}
}

func TestDoorsBridgeTokenFileIsPrivateAndRemovedOnStop(t *testing.T) {
	p, addr, runDir := startLocalBridge(t, t.TempDir())
	dir := filepath.Join(runDir, "tether")
	path, err := bridge.TokenFile(dir, addr)
	if err != nil {
		t.Fatal(err)
	}
	for what, tc := range map[string]struct {
		path string
		mode os.FileMode
	}{"token file": {path, 0o600}, "its directory": {dir, 0o700}} {
		st, err := os.Stat(tc.path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if st.Mode().Perm() != tc.mode {
			t.Errorf("%s %s: mode %o, want %o", what, tc.path, st.Mode().Perm(), tc.mode)
		}
	}
	if !strings.Contains(p.waitLine(time.Second, "http listener started"), path) {
		t.Errorf("the bridge's log does not name its token file %s", path)
	}
	p.stop(syscall.SIGTERM, 10*time.Second)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the token file after the bridge stopped: %v, want it removed", err)
	}
}

// startBrokerWith runs `tether broker` on a free loopback port with args
// alone (no --secret: runBroker's), in its own XDG_RUNTIME_DIR.
func startBrokerWith(t *testing.T, args ...string) *brokerProc {
	t.Helper()
	cmd := exec.Command(tetherBin, append([]string{"broker", "--listen", "127.0.0.1:0", "--log-level", "debug"}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+filepath.Join(t.TempDir(), "run"))
	p := start(t, "broker", cmd)
	var ev struct {
		Listen   string `json:"listen"`
		Instance string `json:"instance"`
	}
	if err := json.Unmarshal([]byte(p.waitLine(20*time.Second, "broker listening")), &ev); err != nil || ev.Listen == "" {
		t.Fatal("no listen address in the broker's log")
	}
	return &brokerProc{proc: p, url: "http://" + ev.Listen, instance: ev.Instance}
}

// tetherToken runs `tether token` with args and returns the token.
func tetherToken(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(tetherBin, append([]string{"token"}, args...)...).Output()
	if err != nil {
		t.Fatalf("tether token %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

func TestDoorsBrokerWithoutKeysRefusesAnUnauthenticatedBridgeAndCaller(t *testing.T) {
	b := startBrokerWith(t)
	var ev struct {
		SecretFile string `json:"secret_file"`
	}
	if err := json.Unmarshal([]byte(b.waitLine(time.Second, "no keys given")), &ev); err != nil || ev.SecretFile == "" {
		t.Fatal("the broker did not say where its generated secret is")
	}
	if st, err := os.Stat(ev.SecretFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file %s: %v, mode %v; want 0600", ev.SecretFile, err, st)
	}

	// A bridge without a token: the CONNECT is refused.
	w := dialWire(t, b.url, "", nil)
	if f := w.connect("", "ws-doors"); !strings.HasPrefix(f, "44") || !strings.Contains(f, protocol.CodeUnauthorized) {
		t.Fatalf("CONNECT without a token answered %q, want a CONNECT_ERROR unauthorized", f)
	}
	// A caller without a token, or with one of another secret: 401.
	for name, tok := range map[string]string{"no token": "", "another secret's token": token(t, "caller", "ws-doors")} {
		if r := b.call("ws-doors", tok, `{"endpoint":"/api/ping"}`); r.status != http.StatusUnauthorized || r.resp.Error != protocol.CodeUnauthorized {
			t.Errorf("%s: HTTP %d %+v, want 401 unauthorized", name, r.status, r.resp)
		}
	}

	// Tokens made from the secret file are accepted: a bridge connects and
	// a caller's call is answered.
	bridgeTok := tetherToken(t, "--secret-file", ev.SecretFile, "--role", "bridge", "--workspace", "ws-doors")
	callerTok := tetherToken(t, "--secret-file", ev.SecretFile, "--role", "caller", "--workspace", "ws-doors")
	start(t, "bridge", exec.Command(tetherBin, "bridge", "--broker", b.url, "--workspace", "ws-doors", "--token", bridgeTok, "--root", t.TempDir()))
	var r callResult
	testwait.Until(t, 10*time.Second, func() bool {
		r = b.call("ws-doors", callerTok, `{"endpoint":"/api/ping","payload":{"doors":1}}`)
		return r.resp.Success
	}, "a call with a token of the secret file to succeed (last: HTTP %d %+v)", r.status, r.resp)
}

func TestDoorsBrokerSecretFileIsReadAndAPublicAddressNeedsIt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	if err := os.WriteFile(path, []byte("doors-secret-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBrokerWith(t, "--secret-file", path)
	tok := tetherToken(t, "--secret", "doors-secret-0123456789", "--role", "caller", "--workspace", "ws-x")
	if r := b.call("ws-x", tok, `{"endpoint":"/api/ping","timeout":1}`); r.resp.Error != protocol.CodeWorkspaceOffline {
		t.Errorf("a token of the file's secret: HTTP %d %+v, want workspace_offline (authenticated)", r.status, r.resp)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tetherBin, "broker", "--listen", "127.0.0.1:0", "--secret-file", path).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "chmod 600") {
		t.Errorf("a secret file others may read: %v %s, want exit 2 naming chmod 600", err, out)
	}
	out, err = exec.Command(tetherBin, "broker", "--listen", "0.0.0.0:0", "--insecure-no-auth").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("--insecure-no-auth on 0.0.0.0: %v %s, want exit 2", err, out)
	}
}

func TestDoorsInsecureNoAuthAcceptsAndWarnsOnEveryConnection(t *testing.T) {
	b := startBrokerWith(t, "--insecure-no-auth")
	const warning = "authentication is off (--insecure-no-auth): let in without a token"
	w := dialWire(t, b.url, "", nil)
	if f := w.connect("", "ws-open"); !strings.HasPrefix(f, `40{"sid"`) {
		t.Fatalf("CONNECT without a token answered %q", f)
	}
	testwait.Until(t, 5*time.Second, func() bool { return countLines(b.proc, warning) >= 1 }, "a warning for the socket let in")
	start(t, "bridge", exec.Command(tetherBin, "bridge", "--broker", b.url, "--workspace", "ws-open2", "--root", t.TempDir()))
	testwait.Until(t, 10*time.Second, func() bool {
		return b.call("ws-open2", "", `{"endpoint":"/api/ping"}`).resp.Success
	}, "a call without a token to be answered")
	before := countLines(b.proc, warning)
	for range 3 {
		if r := b.call("ws-open2", "", `{"endpoint":"/api/ping"}`); !r.resp.Success {
			t.Fatalf("HTTP %d %+v", r.status, r.resp)
		}
	}
	testwait.Until(t, 5*time.Second, func() bool { return countLines(b.proc, warning) >= before+3 }, "a warning for each of 3 calls (had %d before)", before)
}

// request sends one request and returns its answer with the body read.
func request(t *testing.T, method, url string, header map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

func TestDoorsCORSOnTheCallerAPIAndPolling(t *testing.T) {
	const app, evil = "https://app.example", "https://evil.example"
	b := startBroker(t, "--cors-origin", app)
	startBridge(t, b, "ws-cors")
	tok := token(t, "caller", "ws-cors")
	call := b.url + "/api/v1/workspaces/ws-cors/calls"
	poll := b.url + "/socket.io/?EIO=4&transport=polling"
	for name, url := range map[string]string{"API": call, "polling": poll} {
		t.Run(name, func(t *testing.T) {
			res, _ := request(t, http.MethodOptions, url, map[string]string{
				"Origin": app, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type",
			}, "")
			if res.StatusCode != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != app ||
				res.Header.Get("Access-Control-Allow-Credentials") != "true" ||
				!strings.Contains(strings.ToLower(res.Header.Get("Access-Control-Allow-Headers")), "authorization") ||
				!strings.Contains(res.Header.Get("Access-Control-Allow-Methods"), "POST") {
				t.Errorf("preflight of a listed origin: HTTP %d %v", res.StatusCode, res.Header)
			}
			res, _ = request(t, http.MethodOptions, url, map[string]string{"Origin": evil, "Access-Control-Request-Method": "POST"}, "")
			if res.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight of an unlisted origin got Allow-Origin %q", res.Header.Get("Access-Control-Allow-Origin"))
			}
		})
	}
	// The actual requests: a listed origin is let read the answer; an
	// unlisted one gets the same answer without the header.
	for origin, want := range map[string]string{app: app, evil: ""} {
		res, body := request(t, http.MethodPost, call, map[string]string{"Origin": origin, "Authorization": "Bearer " + tok, "Content-Type": "application/json"},
			`{"endpoint":"/api/ping","payload":{"cors":1}}`)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, `"success":true`) || res.Header.Get("Access-Control-Allow-Origin") != want {
			t.Errorf("call from %s: HTTP %d %s, Allow-Origin %q; want 200, success, %q", origin, res.StatusCode, body, res.Header.Get("Access-Control-Allow-Origin"), want)
		}
		if !slices.Contains(res.Header.Values("Vary"), "Origin") {
			t.Errorf("call from %s: Vary %q lacks Origin", origin, res.Header.Values("Vary"))
		}
		res, body = request(t, http.MethodGet, poll, map[string]string{"Origin": origin}, "")
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(body, "0{") || res.Header.Get("Access-Control-Allow-Origin") != want {
			t.Errorf("polling open from %s: HTTP %d %.40q, Allow-Origin %q; want 200, an open packet, %q", origin, res.StatusCode, body, res.Header.Get("Access-Control-Allow-Origin"), want)
		}
	}
}

func TestDoorsCORSWildcardNeverGoesWithCredentials(t *testing.T) {
	b := startBroker(t, "--cors-origin", "*")
	res, _ := request(t, http.MethodOptions, b.url+"/api/v1/workspaces", map[string]string{"Origin": "https://any.example", "Access-Control-Request-Method": "GET"}, "")
	if res.Header.Get("Access-Control-Allow-Origin") != "*" || res.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("wildcard: %v, want * without credentials", res.Header)
	}
}

// pollOpenFrom opens a polling session with X-Forwarded-For xff and
// returns the HTTP status.
func pollOpenFrom(t *testing.T, b *brokerProc, xff string) int {
	t.Helper()
	res, _ := request(t, http.MethodGet, b.url+"/socket.io/?EIO=4&transport=polling", map[string]string{"X-Forwarded-For": xff}, "")
	return res.StatusCode
}

func TestDoorsTrustedProxyLimitsEachForwardedClient(t *testing.T) {
	// The test's requests come from 127.0.0.1: a proxy on this host.
	b := startBroker(t, "--trusted-proxies", "127.0.0.1/32", "--conn-rate", "0.01", "--conn-burst", "2")
	for i := range 2 {
		if s := pollOpenFrom(t, b, "6.6.6.6, 198.51.100.1"); s != http.StatusOK {
			t.Fatalf("open %d from 198.51.100.1: HTTP %d", i, s)
		}
	}
	if s := pollOpenFrom(t, b, "198.51.100.1"); s != http.StatusTooManyRequests {
		t.Errorf("third open from 198.51.100.1: HTTP %d, want 429", s)
	}
	// Another client behind the same proxy has its own bucket; what the
	// first wrote to the left of the proxy's entry does not count.
	for i := range 2 {
		if s := pollOpenFrom(t, b, "198.51.100.1, 203.0.113.9"); s != http.StatusOK {
			t.Fatalf("open %d from 203.0.113.9: HTTP %d, want 200 (limited apart from 198.51.100.1)", i, s)
		}
	}
	// The logs name the client too.
	w := dialWire(t, b.url, "", http.Header{"X-Forwarded-For": {"192.0.2.44"}})
	w.connect(token(t, "bridge", "ws-xff"), "ws-xff")
	testwait.Until(t, 5*time.Second, func() bool { return countLines(b.proc, `"remote":"192.0.2.44"`) > 0 }, "a log line naming the forwarded client")
}

func TestDoorsUntrustedPeerXForwardedForIsIgnored(t *testing.T) {
	b := startBroker(t, "--trusted-proxies", "10.0.0.0/8", "--limit-loopback", "--conn-rate", "0.01", "--conn-burst", "2")
	for i, xff := range []string{"198.51.100.1", "203.0.113.9"} {
		if s := pollOpenFrom(t, b, xff); s != http.StatusOK {
			t.Fatalf("open %d: HTTP %d", i, s)
		}
	}
	if s := pollOpenFrom(t, b, "192.0.2.77"); s != http.StatusTooManyRequests {
		t.Errorf("third open from the same peer with yet another X-Forwarded-For: HTTP %d, want 429 (the header ignored)", s)
	}
	if countLines(b.proc, "198.51.100.1") > 0 {
		t.Error("a log line names an address from an untrusted peer's X-Forwarded-For")
	}
}

func TestDoorsReadyzIsFalseFromTheStartOfADrainWhileACallFinishes(t *testing.T) {
	b := startBroker(t, "--drain", "20s")
	root := t.TempDir()
	start(t, "bridge", bridgeCmd(b, "ws-drain", token(t, "bridge", "ws-drain"), root))
	testwait.Until(t, 10*time.Second, func() bool { return b.holds("ws-drain") }, "the broker holding ws-drain")
	if s := b.readyz(); s != http.StatusOK {
		t.Fatalf("/readyz = %d before the drain", s)
	}
	// A call that is in flight until the test lets it finish: the command
	// waits for a file the test writes.
	release := filepath.Join(root, "release")
	ch := b.goCall("ws-drain", token(t, "caller", "ws-drain"),
		`{"endpoint":"/api/terminal/execute","timeout":30,"payload":{"hidden":true,"command":"touch started; while [ ! -e release ]; do sleep 0.05; done; echo finished"}}`)
	testwait.Until(t, 10*time.Second, func() bool { _, err := os.Stat(filepath.Join(root, "started")); return err == nil }, "the call's command to start")

	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	testwait.Until(t, time.Second, func() bool { return b.readyz() == http.StatusServiceUnavailable }, "/readyz answering 503 within 1s of SIGTERM")
	t.Logf("/readyz 503 %v after SIGTERM", time.Since(signalled))
	select {
	case r := <-ch:
		t.Fatalf("the call ended before it was let finish: %+v", r)
	default:
	}
	// Still not ready a while later, with the call still in flight.
	if s := b.readyz(); s != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d during the drain, want 503", s)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, 10*time.Second)
	if r.err != nil || r.status != http.StatusOK || !r.resp.Success || !strings.Contains(string(r.resp.Result), "finished") {
		t.Fatalf("the call in flight during the drain: HTTP %d %v %+v, want its success", r.status, r.err, r.resp)
	}
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the broker did not exit once its call was answered")
	}
}

func TestDoorsAttachTakesAnExplicitTokenAndRefusesAWrongOne(t *testing.T) {
	_, addr, runDir := startLocalBridge(t, t.TempDir())
	path, err := bridge.TokenFile(filepath.Join(runDir, "tether"), addr)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimSpace(string(raw))
	// Another run directory: attach cannot find the file, so only the
	// token given explicitly can work.
	elsewhere := "XDG_RUNTIME_DIR=" + t.TempDir()

	cmd := exec.Command(tetherBin, "attach", "--bridge-http", addr, "--bridge-token", "wrong")
	cmd.Env = append(os.Environ(), elsewhere)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refused the token") || strings.Contains(string(out), tok) {
		t.Errorf("attach with a wrong token: %v %s, want a refusal naming the token as the reason", err, out)
	}
	cmd = exec.Command(tetherBin, "attach", "--bridge-http", addr)
	cmd.Env = append(os.Environ(), elsewhere)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "--bridge-token") {
		t.Errorf("attach without a token file: %v %s, want an error pointing to --bridge-token", err, out)
	}
	for name, args := range map[string][]string{
		"--bridge-token":    {"--bridge-token", tok},
		bridge.HTTPTokenEnv: nil,
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(tetherBin, append([]string{"attach", "--bridge-http", addr}, args...)...)
			cmd.Env = append(os.Environ(), elsewhere)
			if args == nil {
				cmd.Env = append(cmd.Env, bridge.HTTPTokenEnv+"="+tok)
			}
			p := start(t, "attach", cmd)
			p.waitLine(10*time.Second, "tether attach: ", "the visible terminal")
		})
	}
}
