package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
)

// The audit log (issue 31, part 3): --audit-log on the broker and the
// bridge writes one JSON line per connection event and per call, with who
// (the token's sub/jti/kid/role), never a token, a payload or a file's
// content; SIGHUP reopens it for logrotate; a file that cannot be opened
// stops the start; a failing disk is counted and never holds up a call.

// auditLine is one line of an audit log: parsed strictly into the
// documented schema (audit.Event), and kept raw.
type auditLine struct {
	audit.Event
	raw string
}

// readAudit parses every line of the audit log at path; a line that is
// not the documented schema fails t. A line still being written (no
// newline yet: a process may be writing while the test reads) is left for
// the next read.
func readAudit(t *testing.T, path string) []auditLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var out []auditLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l auditLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l.Event); err != nil {
			t.Fatalf("%s: line %q is not the audit schema: %v", path, sc.Text(), err)
		}
		l.raw = sc.Text()
		out = append(out, l)
	}
	return out
}

// find returns the lines of event that match, and fails t when there is
// none.
func findAudit(t *testing.T, lines []auditLine, event string, match func(auditLine) bool, what string) auditLine {
	t.Helper()
	for _, l := range lines {
		if l.Event.Event == event && (match == nil || match(l)) {
			return l
		}
	}
	var all []string
	for _, l := range lines {
		all = append(all, l.raw)
	}
	t.Fatalf("no %s line for %s in:\n%s", event, what, strings.Join(all, "\n"))
	return auditLine{}
}

// checkCommon checks what every line has: RFC 3339 UTC time with
// sub-seconds, the instance and component.
func checkCommon(t *testing.T, lines []auditLine, instance, component string) {
	t.Helper()
	for _, l := range lines {
		var raw struct {
			Time string `json:"time"`
		}
		_ = json.Unmarshal([]byte(l.raw), &raw)
		if _, err := time.Parse(time.RFC3339Nano, raw.Time); err != nil || !strings.HasSuffix(raw.Time, "Z") || !strings.Contains(raw.Time, ".") {
			t.Errorf("time %q: want RFC 3339 UTC with sub-seconds", raw.Time)
		}
		if time.Since(l.Time) > 5*time.Minute || time.Until(l.Time) > time.Minute {
			t.Errorf("time %v is not now", l.Time)
		}
		if l.Instance != instance || l.Component != component {
			t.Errorf("line %s: instance %q component %q, want %q %q", l.raw, l.Instance, l.Component, instance, component)
		}
	}
}

// principalIs reports whether l names the token tok (role and jti).
func principalIs(t *testing.T, l auditLine, tok, role string) bool {
	return l.Principal != nil && l.Principal.JTI == jtiOf(t, tok) && l.Principal.Role == role
}

func TestAuditLogRecordsConnectionsCallsAndRefusalsWithoutTokensOrPayloads(t *testing.T) {
	dir := t.TempDir()
	brokerLog, bridgeLog := filepath.Join(dir, "broker-audit.log"), filepath.Join(dir, "bridge-audit.log")
	b := startBroker(t, "--audit-log", brokerLog, "--trusted-proxies", "127.0.0.1/32")
	ws := "ws-audit"
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"prog.py": "x = 1\nprint(x)\n"})
	bridgeTok := token(t, auth.RoleBridge, ws)
	bridge := start(t, "bridge "+ws, exec.Command(tetherBin, "bridge", "--broker", b.url, "--workspace", ws, "--token", bridgeTok,
		"--root", root, "--log-level", "debug", "--audit-log", bridgeLog))
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "%s holding %s", b.name, ws)

	callerTok := token(t, auth.RoleCaller, ws)
	const payloadMarker, fileMarker = "PAYLOAD-MARKER-51d7e0", "FILE-CONTENT-MARKER-9c2e4b"
	// A terminal call: its command line is recorded, its input is not.
	r := b.call(ws, callerTok, `{"endpoint":"/api/terminal/execute","payload":{"command":"cat","stdin":"`+payloadMarker+`","hidden":true},"timeout":20}`)
	if r.err != nil || !r.resp.Success || !strings.Contains(string(r.resp.Result), payloadMarker) {
		t.Fatalf("terminal call: %v %+v", r.err, r.resp)
	}
	execCID := r.resp.CorrelationID
	// A file written and read: its content is in neither log.
	if r := b.call(ws, callerTok, `{"endpoint":"/api/workspace/write-file","payload":{"path":"notes.txt","content":"`+fileMarker+`"},"timeout":10}`); r.err != nil || !r.resp.Success {
		t.Fatalf("write-file: %v %+v", r.err, r.resp)
	}
	if r := b.call(ws, callerTok, `{"endpoint":"/api/workspace/read-file","payload":{"path":"notes.txt"},"timeout":10}`); r.err != nil || !strings.Contains(string(r.resp.Result), fileMarker) {
		t.Fatalf("read-file: %v %+v", r.err, r.resp)
	}
	// A debug call: its adapter is recorded.
	debugpy := exec.Command("/usr/bin/python3", "-c", "import debugpy").Run() == nil
	var debugCID string
	if debugpy {
		r := b.call(ws, callerTok, `{"endpoint":"/api/debug/start-session","payload":{"language":"python","program":"prog.py","stop_on_entry":true},"timeout":60}`)
		if r.err != nil || !r.resp.Success {
			t.Fatalf("debug start: %v %+v", r.err, r.resp)
		}
		debugCID = r.resp.CorrelationID
		var started struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(r.resp.Result, &started)
		if r := b.call(ws, callerTok, `{"endpoint":"/api/debug/stop-session","payload":{"session_id":"`+started.SessionID+`"},"timeout":30}`); r.err != nil || !r.resp.Success {
			t.Fatalf("debug stop: %v %+v", r.err, r.resp)
		}
	} else {
		t.Log("/usr/bin/python3 cannot import debugpy: the debug call is left out")
	}
	// Refused: a token for another workspace, and a revoked token.
	otherTok := token(t, auth.RoleCaller, "ws-other")
	if r := b.call(ws, otherTok, `{"endpoint":"/api/ping","payload":{"note":"`+payloadMarker+`"}}`); r.status != http.StatusForbidden {
		t.Fatalf("call with another workspace's token: %d %+v, want 403", r.status, r.resp)
	}
	revokedTok := token(t, auth.RoleCaller, ws)
	adminTok := token(t, auth.RoleAdmin)
	if status, raw := b.admin(http.MethodPost, adminTok, `{"jti":"`+jtiOf(t, revokedTok)+`"}`); status != http.StatusCreated {
		t.Fatalf("revoking: %d %s", status, raw)
	}
	b.refusedRevoked(ws, revokedTok)
	// A call without a token, then an async call.
	res, err := http.Post(b.url+"/api/v1/workspaces/"+ws+"/calls", "application/json", strings.NewReader(`{"endpoint":"/api/ping","async":true}`))
	if err == nil {
		res.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodPost, b.url+"/api/v1/workspaces/"+ws+"/calls", strings.NewReader(`{"endpoint":"/api/ping","async":true,"payload":{"note":"`+payloadMarker+`"}}`))
	req.Header.Set("Authorization", "Bearer "+callerTok)
	res, err = http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("async submit: %v %v", err, res)
	}
	var rec struct {
		CorrelationID string `json:"correlation_id"`
	}
	_ = json.NewDecoder(res.Body).Decode(&rec)
	res.Body.Close()

	// Its record read once final, and a cancel (too late).
	for _, r := range []struct{ method, path string }{{http.MethodGet, "?wait=10"}, {http.MethodPost, "/cancel"}} {
		req, _ := http.NewRequest(r.method, b.url+"/api/v1/calls/"+rec.CorrelationID+r.path, nil)
		req.Header.Set("Authorization", "Bearer "+callerTok)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %v %v", r.method, r.path, err, res)
		}
		res.Body.Close()
	}
	// A chunked request: net/http serves it, not the call server.
	req, _ = http.NewRequest(http.MethodPost, b.url+"/api/v1/workspaces/"+ws+"/calls", io.MultiReader(strings.NewReader(`{"endpoint":"/api/workspace/read-file","payload":{"path":"notes.txt"}}`)))
	req.Header.Set("Authorization", "Bearer "+callerTok)
	var chunked struct {
		CorrelationID string `json:"correlation_id"`
	}
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("chunked call: %v %v", err, res)
	} else {
		_ = json.NewDecoder(res.Body).Decode(&chunked)
		res.Body.Close()
	}
	if chunked.CorrelationID == "" {
		t.Fatal("chunked call: no correlation id")
	}
	// A call through a trusted proxy: the client is the one it names.
	req, _ = http.NewRequest(http.MethodPost, b.url+"/api/v1/workspaces/"+ws+"/calls", strings.NewReader(`{"endpoint":"/api/ping"}`))
	req.Header.Set("Authorization", "Bearer "+callerTok)
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("proxied call: %v %v", err, res)
	} else {
		res.Body.Close()
	}
	// An MCP tool call.
	sid, _ := rawMCPSession(t, b, ws, callerTok, false)
	req, _ = http.NewRequest(http.MethodPost, b.url+"/api/v1/workspaces/"+ws+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"file_list","arguments":{"path":"."}}}`))
	for k, v := range map[string]string{"Authorization": "Bearer " + callerTok, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-06-18"} {
		req.Header.Set(k, v)
	}
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("MCP tools/call: %v %v", err, res)
	} else {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(body), "prog.py") {
			t.Fatalf("MCP file_list: %s", body)
		}
	}

	// The bridge goes: the broker records the disconnect.
	bridge.stop(syscall.SIGTERM, 10*time.Second)
	testwait.Until(t, 5*time.Second, func() bool {
		data, _ := os.ReadFile(brokerLog)
		return bytes.Contains(data, []byte(`"event":"disconnect"`))
	}, "a disconnect line in the broker's audit log")
	// A clean stop writes every line queued.
	b.stop(syscall.SIGTERM, 15*time.Second)

	bl, gl := readAudit(t, brokerLog), readAudit(t, bridgeLog)
	checkCommon(t, bl, b.instance, "broker")
	hostname, _ := os.Hostname()
	checkCommon(t, gl, fmt.Sprintf("%s/%d", hostname, bridge.cmd.Process.Pid), "bridge")

	// The broker's lines.
	conn := findAudit(t, bl, audit.Connect, func(l auditLine) bool { return principalIs(t, l, bridgeTok, auth.RoleBridge) }, "the bridge's CONNECT")
	if conn.Workspace != ws || conn.Remote == "" || conn.Session == "" || conn.Door != "socket" || conn.Outcome != audit.OutcomeOK {
		t.Errorf("connect line %s", conn.raw)
	}
	call := findAudit(t, bl, audit.Call, func(l auditLine) bool { return l.CorrelationID == execCID }, "the terminal call")
	if !principalIs(t, call, callerTok, auth.RoleCaller) || call.Workspace != ws || call.Endpoint != "/api/terminal/execute" ||
		call.Outcome != audit.OutcomeOK || call.Status != http.StatusOK || call.DurationMS <= 0 || call.Door != "http" || !strings.HasPrefix(call.Remote, "127.0.0.1:") {
		t.Errorf("call line %s", call.raw)
	}
	forbidden := findAudit(t, bl, audit.CallRefused, func(l auditLine) bool { return principalIs(t, l, otherTok, auth.RoleCaller) }, "the other workspace's token")
	if forbidden.Outcome != "forbidden" || forbidden.Status != http.StatusForbidden || forbidden.Workspace != ws {
		t.Errorf("forbidden line %s", forbidden.raw)
	}
	revoked := findAudit(t, bl, audit.CallRefused, func(l auditLine) bool { return principalIs(t, l, revokedTok, auth.RoleCaller) }, "the revoked token")
	if revoked.Outcome != "unauthorized" || revoked.Status != http.StatusUnauthorized {
		t.Errorf("revoked line %s", revoked.raw)
	}
	findAudit(t, bl, audit.CallRefused, func(l auditLine) bool { return l.Principal == nil && l.Outcome == "unauthorized" }, "the call without a token")
	added := findAudit(t, bl, audit.RevocationAdd, func(l auditLine) bool { return principalIs(t, l, adminTok, auth.RoleAdmin) }, "the admin's revocation")
	if added.Revocation == nil || added.Revocation.JTI != jtiOf(t, revokedTok) {
		t.Errorf("revocation line %s", added.raw)
	}
	async := findAudit(t, bl, audit.AsyncSubmit, func(l auditLine) bool { return l.CorrelationID == rec.CorrelationID }, "the async call")
	if !principalIs(t, async, callerTok, auth.RoleCaller) || async.Outcome == "" || async.Status != http.StatusAccepted || async.Endpoint != "/api/ping" {
		t.Errorf("async line %s", async.raw)
	}
	outcome := findAudit(t, bl, audit.AsyncOutcome, func(l auditLine) bool { return l.CorrelationID == rec.CorrelationID }, "the async call's outcome")
	if outcome.Outcome != audit.OutcomeOK || outcome.Workspace != ws || outcome.Endpoint != "/api/ping" {
		t.Errorf("async outcome line %s", outcome.raw)
	}
	findAudit(t, bl, audit.Call, func(l auditLine) bool { return l.Remote == "203.0.113.7" && l.Endpoint == "/api/ping" }, "the call through a trusted proxy")
	findAudit(t, bl, audit.Call, func(l auditLine) bool {
		return l.CorrelationID == chunked.CorrelationID && principalIs(t, l, callerTok, auth.RoleCaller) && l.Outcome == audit.OutcomeOK
	}, "the chunked call net/http served")
	mcpCall := findAudit(t, bl, audit.Call, func(l auditLine) bool { return l.Door == audit.DoorMCP }, "the MCP tool call")
	if !principalIs(t, mcpCall, callerTok, auth.RoleCaller) || mcpCall.Workspace != ws || mcpCall.Endpoint == "" || mcpCall.Outcome != audit.OutcomeOK ||
		mcpCall.CorrelationID == "" || !strings.HasPrefix(mcpCall.Remote, "127.0.0.1:") {
		t.Errorf("MCP call line %s", mcpCall.raw)
	}
	for _, event := range []string{audit.AsyncStatus, audit.AsyncCancel} {
		l := findAudit(t, bl, event, func(l auditLine) bool { return l.CorrelationID == rec.CorrelationID }, "the async call")
		if !principalIs(t, l, callerTok, auth.RoleCaller) || l.Outcome != "succeeded" || l.Workspace != ws || l.Status != http.StatusOK {
			t.Errorf("%s line %s", event, l.raw)
		}
	}
	disc := findAudit(t, bl, audit.Disconnect, func(l auditLine) bool { return principalIs(t, l, bridgeTok, auth.RoleBridge) }, "the bridge's disconnect")
	if disc.Reason == "" || disc.DurationMS <= 0 || disc.Workspace != ws {
		t.Errorf("disconnect line %s", disc.raw)
	}

	// The bridge's lines: the same calls, by correlation id, with what
	// only the bridge knows.
	findAudit(t, gl, audit.Connect, func(l auditLine) bool { return l.Workspace == ws && l.Remote != "" }, "the bridge's connection")
	bexec := findAudit(t, gl, audit.Call, func(l auditLine) bool { return l.CorrelationID == execCID }, "the terminal call")
	if bexec.Command != "cat" || bexec.Door != "socket" || bexec.Outcome != audit.OutcomeOK || bexec.Endpoint != "/api/terminal/execute" {
		t.Errorf("bridge's terminal call line %s", bexec.raw)
	}
	if debugpy {
		bdbg := findAudit(t, gl, audit.Call, func(l auditLine) bool { return l.CorrelationID == debugCID }, "the debug call")
		if bdbg.Adapter != "debugpy" {
			t.Errorf("bridge's debug call line %s: want adapter debugpy", bdbg.raw)
		}
	}
	findAudit(t, gl, audit.Disconnect, nil, "the bridge's own disconnect")

	// Never a token, a payload or a file's content.
	for _, path := range []string{brokerLog, bridgeLog} {
		data, _ := os.ReadFile(path)
		for name, secret := range map[string]string{"bridge token": bridgeTok, "caller token": callerTok, "other token": otherTok,
			"revoked token": revokedTok, "admin token": adminTok, "payload": payloadMarker, "file content": fileMarker} {
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the %s", path, name)
			}
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", path, st.Mode().Perm(), err)
		}
	}
}

func TestAuditLogRotatedOnSIGHUPLosesAndDuplicatesNoLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	b := startBroker(t, "--audit-log", path)
	ws := "ws-rotate"
	startBridge(t, b, ws)
	tok := token(t, auth.RoleCaller, ws)

	// Calls run all along, on two goroutines, while the file is rotated.
	var made atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if r := b.call(ws, tok, `{"endpoint":"/api/ping","timeout":5}`); r.err != nil || !r.resp.Success {
					t.Errorf("call: %v %+v", r.err, r.resp)
					return
				}
				made.Add(1)
			}
		})
	}
	testwait.Until(t, 10*time.Second, func() bool { return made.Load() >= 50 }, "50 calls made")
	if err := os.Rename(path, path+".1"); err != nil { // what logrotate does
		t.Fatal(err)
	}
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	b.waitLine(5*time.Second, "audit log reopened")
	atRotation := made.Load()
	testwait.Until(t, 10*time.Second, func() bool { return made.Load() >= atRotation+50 }, "50 calls made after the rotation")
	close(stop)
	wg.Wait()
	b.stop(syscall.SIGTERM, 15*time.Second)

	old, cur := readAudit(t, path+".1"), readAudit(t, path)
	seen := map[string]int{}
	count := func(lines []auditLine) int {
		n := 0
		for _, l := range lines {
			if l.Event.Event == audit.Call {
				seen[l.CorrelationID]++
				n++
			}
		}
		return n
	}
	nOld, nCur := count(old), count(cur)
	t.Logf("%d calls: %d lines in the rotated file, %d in the new one", made.Load(), nOld, nCur)
	if int64(nOld+nCur) != made.Load() {
		t.Errorf("%d call lines in the two files, want %d (one per call)", nOld+nCur, made.Load())
	}
	for cid, n := range seen {
		if n != 1 {
			t.Errorf("call %s has %d lines", cid, n)
		}
	}
	if nOld == 0 || nCur < 50 {
		t.Errorf("rotated file %d call lines, new file %d: the rotation did not split them", nOld, nCur)
	}
}

func TestAuditLogThatCannotBeOpenedStopsTheStartNamingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "audit.log")
	for _, args := range [][]string{
		{"broker", "--listen", "127.0.0.1:0", "--secret", secret, "--audit-log", path},
		{"bridge", "--broker", "http://127.0.0.1:1", "--workspace", "w", "--token", "x", "--root", t.TempDir(), "--audit-log", path},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(tetherBin, args...)
		cmd.Stderr = &stderr
		done := make(chan int, 1)
		go func() { done <- exitCode(t, cmd) }()
		select {
		case code := <-done:
			if code != 1 || !strings.Contains(stderr.String(), path) {
				t.Errorf("tether %s with an audit log it cannot open: exit %d, stderr %q; want 1 naming %s", args[0], code, stderr.String(), path)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("tether %s with an audit log it cannot open did not exit", args[0])
		}
	}
}

func TestAuditWriteFailureIsCountedAndCallsAnswerInTime(t *testing.T) {
	// /dev/full fails every write with ENOSPC: a full disk.
	b := startBroker(t, "--audit-log", "/dev/full")
	ws := "ws-full"
	startBridge(t, b, ws)
	tok := token(t, auth.RoleCaller, ws)
	var slowest time.Duration
	for range 20 {
		r := b.call(ws, tok, `{"endpoint":"/api/ping","timeout":5}`)
		if r.err != nil || !r.resp.Success {
			t.Fatalf("call: %v %+v", r.err, r.resp)
		}
		slowest = max(slowest, r.elapsed)
	}
	t.Logf("slowest of 20 calls with the audit disk full: %v", slowest)
	if slowest > time.Second {
		t.Errorf("a call took %v with the audit disk full, want under 1s", slowest)
	}
	testwait.Until(t, 5*time.Second, func() bool {
		return b.metric(`tether_audit_lines_dropped_total{reason="write_failed"}`) >= 20 && b.metric("tether_audit_write_failures_total") >= 1
	}, "the lost lines counted on /metrics")
	b.waitLine(5*time.Second, "audit log lines lost", "no space left on device")
}

func TestAuditLogToStdout(t *testing.T) {
	var out syncBuffer
	cmd := exec.Command(tetherBin, "broker", "--listen", "127.0.0.1:0", "--secret", secret, "--log-level", "debug")
	cmd.Env = append(os.Environ(), "TETHER_AUDIT_LOG=-")
	cmd.Stdout = &out
	p := start(t, "broker", cmd)
	line := p.waitLine(20*time.Second, "broker listening")
	var ev struct {
		Listen string `json:"listen"`
	}
	_ = json.Unmarshal([]byte(line), &ev)
	b := &brokerProc{proc: p, url: "http://" + ev.Listen}
	r := b.call("ws-x", "", `{"endpoint":"/api/ping"}`)
	if r.status != http.StatusUnauthorized {
		t.Fatalf("call without a token: %d", r.status)
	}
	testwait.Until(t, 5*time.Second, func() bool { return strings.Contains(out.String(), `"event":"call_refused"`) }, "the refused call's line on stdout")
	for l := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		var e audit.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Event == "" {
			t.Errorf("stdout line %q is not an audit line", l)
		}
	}
}

func TestAuditLogNamesTheKeyIDOfAKeySignedToken(t *testing.T) {
	dir := t.TempDir()
	pub, k1 := filepath.Join(dir, "pub.jwks.json"), filepath.Join(dir, "k1.jwk.json")
	tetherOut(t, "keys", "new", "--alg", "EdDSA", "--kid", "k1", "--private", k1, "--public-set", pub)
	path := filepath.Join(dir, "audit.log")
	b := startBroker(t, "--keys", pub, "--audit-log", path)
	ws := "ws-kid"
	start(t, "bridge "+ws, bridgeCmd(b, ws, mint(t, k1, "k1", auth.RoleBridge, ws, time.Hour).Token, t.TempDir()))
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "%s held", ws)
	caller := mint(t, k1, "k1", auth.RoleCaller, ws, time.Hour)
	if r := b.call(ws, caller.Token, `{"endpoint":"/api/ping","timeout":5}`); r.status != http.StatusOK {
		t.Fatalf("call: %d %+v %v", r.status, r.resp, r.err)
	}
	b.stop(syscall.SIGTERM, 15*time.Second)
	lines := readAudit(t, path)
	call := findAudit(t, lines, audit.Call, nil, "the call")
	if call.Principal == nil || call.Principal.KID != "k1" || call.Principal.JTI != caller.JTI {
		t.Errorf("call line %s: want kid k1 and jti %s", call.raw, caller.JTI)
	}
	conn := findAudit(t, lines, audit.Connect, nil, "the bridge's CONNECT")
	if conn.Principal == nil || conn.Principal.KID != "k1" || conn.Principal.Role != auth.RoleBridge {
		t.Errorf("connect line %s: want kid k1, role bridge", conn.raw)
	}
}

func TestAuditLogRecordsAReplacedAndARefusedConnection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	b := startBroker(t, "--audit-log", path)
	ws := "ws-replace"
	first := token(t, auth.RoleBridge, ws)
	start(t, "bridge 1", bridgeCmd(b, ws, first, t.TempDir()))
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "%s held", ws)
	start(t, "bridge 2", bridgeCmd(b, ws, token(t, auth.RoleBridge, ws), t.TempDir()))
	wrong := token(t, auth.RoleBridge, "ws-elsewhere")
	start(t, "bridge for another workspace", bridgeCmd(b, ws, wrong, t.TempDir()))
	has := func(event string, tok string) bool {
		for _, l := range readAudit(t, path) {
			if l.Event.Event == event && principalIs(t, l, tok, auth.RoleBridge) {
				return true
			}
		}
		return false
	}
	testwait.Until(t, 10*time.Second, func() bool { return has(audit.Replace, first) && has(audit.ConnectRefused, wrong) },
		"a replace line for the first bridge and a connect_refused line for the wrong token")
	lines := readAudit(t, path)
	replaced := findAudit(t, lines, audit.Replace, func(l auditLine) bool { return principalIs(t, l, first, auth.RoleBridge) }, "the first bridge")
	if replaced.Workspace != ws || replaced.Session == "" || !strings.Contains(replaced.Reason, "taken over") {
		t.Errorf("replace line %s", replaced.raw)
	}
	testwait.Until(t, 5*time.Second, func() bool {
		for _, l := range readAudit(t, path) {
			if l.Event.Event == audit.Disconnect && l.Session == replaced.Session && l.Reason == "replaced" {
				return true
			}
		}
		return false
	}, "the replaced connection's disconnect line")
	refused := findAudit(t, lines, audit.ConnectRefused, func(l auditLine) bool { return principalIs(t, l, wrong, auth.RoleBridge) }, "the wrong token")
	if refused.Outcome != "forbidden" || refused.Workspace != ws {
		t.Errorf("connect_refused line %s", refused.raw)
	}
}

func TestBridgeAuditLogRotatedOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bridge-audit.log")
	b := startBroker(t)
	ws := "ws-bridge-rotate"
	bridge := startBridge(t, b, ws, "--audit-log", path)
	tok := token(t, auth.RoleCaller, ws)
	calls := func(n int) {
		for range n {
			if r := b.call(ws, tok, `{"endpoint":"/api/ping","timeout":5}`); r.err != nil || !r.resp.Success {
				t.Fatalf("call: %v %+v", r.err, r.resp)
			}
		}
	}
	calls(10)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := bridge.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	bridge.waitLine(5*time.Second, "audit log reopened")
	calls(10)
	bridge.stop(syscall.SIGTERM, 10*time.Second)
	count := func(p string) (n int) {
		for _, l := range readAudit(t, p) {
			if l.Event.Event == audit.Call {
				n++
			}
		}
		return n
	}
	if old, cur := count(path+".1"), count(path); old != 10 || cur != 10 {
		t.Errorf("%d call lines in the rotated file and %d in the new one, want 10 and 10", old, cur)
	}
}
