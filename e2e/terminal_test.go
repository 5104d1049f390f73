package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

// The terminal tests drive /api/terminal/* from an HTTP caller through a
// `tether broker` and a `tether bridge` process. Every bridge gets a tag in
// its environment, which each command it runs inherits; the processes
// carrying it are what the bridge started, wherever they were reparented.

const tagEnv = "TETHER_E2E_TAG"

// termBridge is a broker and a bridge serving a fresh root.
type termBridge struct {
	t      *testing.T
	b      *brokerProc
	bridge *proc
	ws     string
	tok    string
	root   string // resolved, as the bridge reports cwds
	tag    string
	http   string // the bridge's --http address
}

// startTermBridge starts a broker and a bridge with its local HTTP
// listener on a free loopback port. When the test ends the bridge is
// stopped and no process it started may be left.
func startTermBridge(t *testing.T, extra ...string) *termBridge {
	t.Helper()
	return startTermBridgeOn(t, startBroker(t), "ws-term", extra...)
}

// startTermBridgeOn starts such a bridge for workspace ws on broker b.
func startTermBridgeOn(t *testing.T, b *brokerProc, ws string, extra ...string) *termBridge {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &termBridge{t: t, b: b, ws: ws, root: root, tag: "e2e-" + rand.Text()}
	e.tok = token(t, auth.RoleCaller, e.ws)
	args := append([]string{"bridge", "--broker", b.url, "--workspace", e.ws, "--token", token(t, auth.RoleBridge, e.ws),
		"--root", root, "--http", "127.0.0.1:0", "--log-level", "debug"}, extra...)
	cmd := exec.Command(tetherBin, args...)
	cmd.Env = append(os.Environ(), tagEnv+"="+e.tag)
	e.bridge = start(t, "bridge", cmd)
	var ev struct {
		Addr string `json:"addr"`
	}
	line := e.bridge.waitLine(10*time.Second, "http listener started")
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Addr == "" {
		t.Fatalf("cannot read the bridge's HTTP address from %q", line)
	}
	e.http = ev.Addr
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(e.ws) }, "%s holding %s", b.name, e.ws)
	t.Cleanup(func() {
		start := time.Now()
		e.bridge.stop(syscall.SIGTERM, 10*time.Second)
		if took := time.Since(start); took > time.Second {
			t.Logf("the bridge took %v to exit after SIGTERM", took)
		}
		if left := e.tagged(); len(left) > 0 {
			t.Errorf("processes left after the bridge exited: %v", left)
		}
	})
	return e
}

// call sends one call and fails the test unless the broker answered it.
func (e *termBridge) call(endpoint string, payload any, timeout float64) callResult {
	e.t.Helper()
	body, err := json.Marshal(map[string]any{"endpoint": endpoint, "payload": payload, "timeout": timeout})
	if err != nil {
		e.t.Fatal(err)
	}
	r := e.b.call(e.ws, e.tok, string(body))
	if r.err != nil || r.status != http.StatusOK {
		e.t.Fatalf("%s: HTTP %d %v", endpoint, r.status, r.err)
	}
	return r
}

// result decodes a successful call's result into v.
func (e *termBridge) result(r callResult, v any) {
	e.t.Helper()
	if !r.resp.Success {
		e.t.Fatalf("call failed: %s: %s", r.resp.Error, r.resp.Message)
	}
	if err := json.Unmarshal(r.resp.Result, v); err != nil {
		e.t.Fatalf("decoding result %s: %v", r.resp.Result, err)
	}
}

// execute runs a command and returns its result and how long the whole
// call took. A sync result must carry every field of the issue.
func (e *termBridge) execute(payload map[string]any) (terminal.ExecResult, time.Duration) {
	e.t.Helper()
	r := e.call("/api/terminal/execute", payload, 30)
	var res terminal.ExecResult
	e.result(r, &res)
	if payload["mode"] != "async" {
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(r.resp.Result, &keys)
		for _, k := range []string{"success", "command", "output", "error", "exit_code", "duration_ms", "timed_out", "truncated"} {
			if _, ok := keys[k]; !ok {
				e.t.Errorf("sync result %s lacks %q", r.resp.Result, k)
			}
		}
	}
	return res, r.elapsed
}

// startAsync starts an async command and checks the answer's shape.
func (e *termBridge) startAsync(payload map[string]any) terminal.ExecResult {
	e.t.Helper()
	payload["mode"] = "async"
	r, _ := e.execute(payload)
	// A quick command may have ended by the time the call is answered.
	if !r.Success || r.SessionID == "" || (r.Status != terminal.StatusRunning && r.Status != terminal.StatusExited) {
		e.t.Fatalf("async start of %q: %+v", payload["command"], r)
	}
	return r
}

func (e *termBridge) output(id string, offset int64) terminal.OutputResult {
	e.t.Helper()
	var o terminal.OutputResult
	e.result(e.call("/api/terminal/sessions/"+id+"/output", map[string]any{"offset": offset}, 10), &o)
	return o
}

// readAll polls a session by offset until it has ended and all its
// output is read, checking that the offsets chain up.
func (e *termBridge) readAll(id string) (string, terminal.OutputResult) {
	e.t.Helper()
	var out strings.Builder
	var last terminal.OutputResult
	var offset int64
	testwait.Until(e.t, 10*time.Second, func() bool {
		r := e.output(id, offset)
		if r.Offset != offset || r.Missed != 0 || r.NextOffset != r.Offset+int64(len(r.Output)) {
			e.t.Fatalf("asked for %d, got offset %d missed %d next %d with %d bytes", offset, r.Offset, r.Missed, r.NextOffset, len(r.Output))
		}
		out.WriteString(r.Output)
		offset, last = r.NextOffset, r
		return !r.Running && !r.More
	}, "session %s to end", id)
	return out.String(), last
}

// taggedProc is a live process that inherited the bridge's tag.
type taggedProc struct {
	pid  int
	comm string
	args string
}

func (p taggedProc) String() string { return fmt.Sprintf("%d(%s)", p.pid, p.args) }

// tagged lists the live processes, other than the bridge, whose
// environment carries the bridge's tag.
func (e *termBridge) tagged() []taggedProc {
	want := []byte(tagEnv + "=" + e.tag + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []taggedProc
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == e.bridge.cmd.Process.Pid {
			continue
		}
		env, err := os.ReadFile("/proc/" + ent.Name() + "/environ")
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		open, k := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || k < 0 || k+2 >= len(stat) || stat[k+2] == 'Z' || stat[k+2] == 'X' {
			continue
		}
		args, _ := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		out = append(out, taggedProc{pid: pid, comm: string(stat[open+1 : k]),
			args: strings.TrimSpace(strings.ReplaceAll(string(args), "\x00", " "))})
	}
	return out
}

// running lists the tagged processes whose command line is args.
func (e *termBridge) running(args string) []taggedProc {
	var out []taggedProc
	for _, p := range e.tagged() {
		if p.args == args {
			out = append(out, p)
		}
	}
	return out
}

// modes runs f as a subtest for the visible terminal (the default) and
// for hidden processes, on one bridge.
func (e *termBridge) modes(f func(t *testing.T, hidden bool)) {
	for _, hidden := range []bool{false, true} {
		name := terminal.TerminalVisible
		if hidden {
			name = terminal.TerminalHidden
		}
		e.t.Run(name, func(t *testing.T) {
			saved := e.t
			e.t = t
			defer func() { e.t = saved }()
			f(t, hidden)
		})
	}
}

func wantRanIn(t *testing.T, r terminal.ExecResult, hidden bool) {
	t.Helper()
	want := terminal.TerminalVisible
	if hidden {
		want = terminal.TerminalHidden
	}
	if r.Terminal != want {
		t.Errorf("ran in the %s terminal, want %s (note %q)", r.Terminal, want, r.Note)
	}
}

func TestTerminalSilentCommandsReturnAtOnce(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		for _, c := range []string{"true", "mkdir -p .vscode"} {
			r, took := e.execute(map[string]any{"command": c, "hidden": hidden})
			wantRanIn(t, r, hidden)
			if !r.Success || r.ExitCode != 0 || r.TimedOut {
				t.Errorf("%q: %+v", c, r)
			}
			if took > 500*time.Millisecond {
				t.Errorf("%q took %v through the broker and bridge; a silent command returns when it exits", c, took)
			}
			t.Logf("%q: %v", c, took)
		}
	})
	if fi, err := os.Stat(filepath.Join(e.root, ".vscode")); err != nil || !fi.IsDir() {
		t.Errorf(".vscode was not created: %v", err)
	}
}

const addNumbersC = `#include <stdio.h>
int add(int a, int b) { return a + b; }
int main(void) { printf("%d\n", add(2, 3)); return 0; }
`

func TestTerminalGccReturnsWithinItsCompileTime(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed")
	}
	e := startTermBridge(t)
	if err := os.WriteFile(filepath.Join(e.root, "add_numbers.c"), []byte(addNumbersC), 0o644); err != nil {
		t.Fatal(err)
	}
	e.modes(func(t *testing.T, hidden bool) {
		// Interleaved rounds of the same compile, run directly and through
		// tether; the best of each is compared, as the machine is shared.
		compile, through := time.Hour, time.Hour
		for range 3 {
			c := exec.Command(gcc, "-g", "-o", "baseline", "add_numbers.c")
			c.Dir = e.root
			start := time.Now()
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("baseline gcc: %v\n%s", err, out)
			}
			compile = min(compile, time.Since(start))
			r, took := e.execute(map[string]any{"command": "gcc -g -o add_numbers add_numbers.c", "hidden": hidden})
			if !r.Success || r.ExitCode != 0 || r.TimedOut || r.Output != "" {
				t.Fatalf("gcc: %+v", r)
			}
			wantRanIn(t, r, hidden)
			through = min(through, took)
		}
		t.Logf("gcc: %v direct, %v through tether (best of 3)", compile, through)
		if through > compile+200*time.Millisecond || through > time.Second {
			t.Errorf("gcc through tether took %v at best; compiling takes %v", through, compile)
		}
		if r, _ := e.execute(map[string]any{"command": "./add_numbers", "hidden": hidden}); r.Output != "5\n" {
			t.Errorf("./add_numbers printed %q", r.Output)
		}
	})
}

func TestTerminalFailingCommandReturnsExitCodeAndStderr(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		r, _ := e.execute(map[string]any{"command": "echo out; ls /no/such/dir-4711", "hidden": hidden})
		if r.Success || r.ExitCode != 2 || r.TimedOut {
			t.Errorf("result %+v, want exit 2", r)
		}
		for _, s := range []string{"out\n", "/no/such/dir-4711"} {
			if !strings.Contains(r.Output, s) {
				t.Errorf("output %q lacks %q", r.Output, s)
			}
		}
		if r.Error == "" {
			t.Error("error is empty for a failed command")
		}
		if hidden && (!strings.Contains(r.Error, "No such file") || strings.Contains(r.Error, "out")) {
			t.Errorf("error %q, want the stderr alone", r.Error)
		}
	})
}

func TestTerminalTimeoutKillsTheProcessGroup(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		r, took := e.execute(map[string]any{"command": "echo started; sleep 30; echo never", "timeout": 1, "hidden": hidden})
		if took > 1500*time.Millisecond {
			t.Errorf("answered after %v, want < 1.5s", took)
		}
		if !r.TimedOut || r.Success {
			t.Errorf("result %+v, want timed_out", r)
		}
		if !strings.Contains(r.Output, "started") || strings.Contains(r.Output, "never") {
			t.Errorf("output %q, want the output so far", r.Output)
		}
		if left := e.running("sleep 30"); len(left) > 0 {
			t.Errorf("left running after the answer: %v", left)
		}
	})
}

func TestTerminalSyncCommandIsBoundedByTheCallTimeout(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		// No timeout in the payload: the call's own timeout (2s) bounds it,
		// and the answer is the command's partial result, not an error.
		r := e.call("/api/terminal/execute", map[string]any{"command": "echo started; sleep 30", "hidden": hidden}, 2)
		var res terminal.ExecResult
		e.result(r, &res)
		if !res.TimedOut || !strings.Contains(res.Output, "started") {
			t.Errorf("result %+v, want timed_out with the output so far", res)
		}
		if r.elapsed > 2*time.Second {
			t.Errorf("answered after %v, past the call's timeout", r.elapsed)
		}
		if left := e.running("sleep 30"); len(left) > 0 {
			t.Errorf("left running after the answer: %v", left)
		}
	})
}

func TestTerminalCallerGoneKillsTheCommand(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		body, _ := json.Marshal(map[string]any{"endpoint": "/api/terminal/execute", "timeout": 30,
			"payload": map[string]any{"command": "sleep 30", "hidden": hidden}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.b.url+"/api/v1/workspaces/"+e.ws+"/calls", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.tok)
		done := make(chan error, 1)
		go func() {
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
			}
			done <- err
		}()
		testwait.Until(t, 5*time.Second, func() bool { return len(e.running("sleep 30")) > 0 }, "sleep to start")
		cancel() // the broker sends tool_cancel
		<-done
		start := time.Now()
		testwait.Until(t, 2*time.Second, func() bool { return len(e.running("sleep 30")) == 0 }, "the sleep to be killed")
		t.Logf("killed %v after the caller left", time.Since(start))
	})
}

func TestTerminalReadFromStdinReturnsAtOnce(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		r, took := e.execute(map[string]any{"command": "read x; echo got=$x", "timeout": 10, "hidden": hidden})
		if took > 500*time.Millisecond || r.TimedOut {
			t.Errorf("read x took %v: %+v", took, r)
		}
		if r.Output != "got=\n" {
			t.Errorf("output %q", r.Output)
		}
	})
}

func TestTerminalAsyncOutputPolledByOffsetYieldsEachLineOnce(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		a := e.startAsync(map[string]any{"command": "for i in 1 2 3 4 5; do echo $i; sleep 0.1; done", "hidden": hidden})
		wantRanIn(t, a, hidden)
		out, last := e.readAll(a.SessionID)
		if out != "1\n2\n3\n4\n5\n" {
			t.Errorf("output %q, want 1..5 once each", out)
		}
		if last.ExitCode == nil || *last.ExitCode != 0 {
			t.Errorf("exit code %v", last.ExitCode)
		}
	})
}

func TestTerminalSigintEndsAsyncSleep(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		a := e.startAsync(map[string]any{"command": "sleep 100", "hidden": hidden})
		testwait.Until(t, 2*time.Second, func() bool { return len(e.running("sleep 100")) > 0 }, "sleep to start")
		start := time.Now()
		var sr struct {
			SessionID string `json:"session_id"`
			Signal    string `json:"signal"`
		}
		e.result(e.call("/api/terminal/sessions/"+a.SessionID+"/signal", map[string]any{"signal": "SIGINT"}, 5), &sr)
		if sr.SessionID != a.SessionID || sr.Signal != "SIGINT" {
			t.Errorf("signal result %+v", sr)
		}
		var o terminal.OutputResult
		testwait.Until(t, 2*time.Second, func() bool { o = e.output(a.SessionID, 0); return !o.Running }, "the session to end")
		if took := time.Since(start); took > time.Second || o.ExitCode == nil || *o.ExitCode != 130 {
			t.Errorf("ended after %v with exit code %v, want 130", took, o.ExitCode)
		}
		if left := e.running("sleep 100"); len(left) > 0 {
			t.Errorf("left running: %v", left)
		}
		r := e.call("/api/terminal/sessions/"+a.SessionID+"/signal", map[string]any{"signal": "SIGINT"}, 5)
		if r.resp.Error != protocol.CodeSessionEnded {
			t.Errorf("signal to an ended session: %+v", r.resp)
		}
	})
}

func TestTerminalStdinReachesAsyncCat(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		a := e.startAsync(map[string]any{"command": "cat; echo cat-done", "hidden": hidden})
		for _, in := range []map[string]any{{"data": "hello\n"}, {"data": "world", "eof": true}} {
			var ir struct {
				SessionID string `json:"session_id"`
				Bytes     int    `json:"bytes"`
			}
			e.result(e.call("/api/terminal/sessions/"+a.SessionID+"/input", in, 5), &ir)
			if ir.SessionID != a.SessionID || ir.Bytes != len(in["data"].(string)) {
				t.Errorf("input result %+v", ir)
			}
		}
		out, last := e.readAll(a.SessionID)
		if out != "hello\nworldcat-done\n" || last.ExitCode == nil || *last.ExitCode != 0 {
			t.Errorf("output %q exit %v", out, last.ExitCode)
		}
	})
}

func TestTerminalVisibleShellKeepsCd(t *testing.T) {
	e := startTermBridge(t)
	if r, _ := e.execute(map[string]any{"command": "cd /tmp"}); !r.Success {
		t.Fatalf("cd /tmp: %+v", r)
	}
	r, _ := e.execute(map[string]any{"command": "pwd"})
	if r.Output != "/tmp\n" || r.Cwd != "/tmp" || r.Terminal != terminal.TerminalVisible {
		t.Errorf("pwd after cd /tmp: %+v", r)
	}
}

func TestTerminalSentinelTextDoesNotEndACommandEarly(t *testing.T) {
	e := startTermBridge(t)
	// Marker-shaped text with a foreign nonce, with none, and the typed
	// nonce assignment: none of it may end the command before its sleep.
	r, took := e.execute(map[string]any{"command": `printf 'a\033]633;D;0123abcdef;0\007b\n'; ` +
		`printf '\033]633;D;;0\007'; printf '__tether_nonce=x""y\n'; sleep 0.3; echo after`})
	if took < 300*time.Millisecond {
		t.Errorf("answered after %v, before the command ended", took)
	}
	if !r.Success || r.Terminal != terminal.TerminalVisible || !strings.HasSuffix(r.Output, "after\n") {
		t.Errorf("result %+v", r)
	}
	if !strings.Contains(r.Output, "a\x1b]633;D;0123abcdef;0\ab\n") {
		t.Errorf("the marker-shaped text was not passed through: %q", r.Output)
	}
}

func TestTerminalLargeOutputIsTruncated(t *testing.T) {
	e := startTermBridge(t)
	e.modes(func(t *testing.T, hidden bool) {
		r, _ := e.execute(map[string]any{"command": "echo HEAD-START; head -c 100000 /dev/zero | tr '\\0' a; echo; echo TAIL-END", "hidden": hidden})
		if !r.Truncated || !r.Success {
			t.Fatalf("truncated=%v success=%v", r.Truncated, r.Success)
		}
		if !strings.HasPrefix(r.Output, "HEAD-START\n") || !strings.HasSuffix(r.Output, "TAIL-END\n") {
			t.Errorf("output does not keep head and tail: %q … %q", r.Output[:20], r.Output[len(r.Output)-20:])
		}
		if len(r.Output) > terminal.DefaultOutputCap+100 {
			t.Errorf("output is %d bytes, cap %d", len(r.Output), terminal.DefaultOutputCap)
		}
	})
	t.Run("configured", func(t *testing.T) {
		e := startTermBridge(t, "--output-cap", "1000")
		r, _ := e.execute(map[string]any{"command": "seq 1 2000", "hidden": true})
		if !r.Truncated || len(r.Output) > 1100 || !strings.HasPrefix(r.Output, "1\n2\n") || !strings.HasSuffix(r.Output, "1999\n2000\n") {
			t.Errorf("truncated=%v, %d bytes", r.Truncated, len(r.Output))
		}
	})
}

func TestTerminalBadInputAnswersStructuredErrors(t *testing.T) {
	e := startTermBridge(t)
	a := e.startAsync(map[string]any{"command": "sleep 100", "hidden": true})
	cases := []struct {
		name, endpoint string
		payload        any
		code           string
		mention        string
	}{
		{"empty command", "/api/terminal/execute", map[string]any{"command": "  "}, protocol.CodeInvalidPayload, "empty"},
		{"command not a string", "/api/terminal/execute", map[string]any{"command": 5}, protocol.CodeInvalidPayload, "command"},
		{"unknown mode", "/api/terminal/execute", map[string]any{"command": "true", "mode": "later"}, protocol.CodeInvalidPayload, "later"},
		{"cwd outside root", "/api/terminal/execute", map[string]any{"command": "true", "cwd": "/etc"}, protocol.CodeInvalidPayload, "/etc"},
		{"cwd escaping root", "/api/terminal/execute", map[string]any{"command": "true", "cwd": "../.."}, protocol.CodeInvalidPayload, "../.."},
		{"missing cwd", "/api/terminal/execute", map[string]any{"command": "true", "cwd": "no-such-dir"}, protocol.CodeInvalidPayload, filepath.Join(e.root, "no-such-dir")},
		{"unknown session output", "/api/terminal/sessions/s-nope/output", map[string]any{}, protocol.CodeSessionNotFound, "s-nope"},
		{"unknown session input", "/api/terminal/sessions/s-nope/input", map[string]any{"data": "x"}, protocol.CodeSessionNotFound, "s-nope"},
		{"unknown session signal", "/api/terminal/sessions/s-nope/signal", map[string]any{"signal": "SIGINT"}, protocol.CodeSessionNotFound, "s-nope"},
		{"unknown signal", "/api/terminal/sessions/" + a.SessionID + "/signal", map[string]any{"signal": "SIGBOGUS"}, protocol.CodeInvalidPayload, "SIGBOGUS"},
		{"empty signal", "/api/terminal/sessions/" + a.SessionID + "/signal", map[string]any{}, protocol.CodeInvalidPayload, "signal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call(c.endpoint, c.payload, 5)
			if r.resp.Success || r.resp.Error != c.code || !strings.Contains(r.resp.Message, c.mention) {
				t.Errorf("got %+v, want %s mentioning %q", r.resp, c.code, c.mention)
			}
		})
	}
	// The bad calls left the session alone.
	if o := e.output(a.SessionID, 0); !o.Running {
		t.Errorf("session ended: %+v", o)
	}
}

func TestTerminalSessionsListStatusExitCodesAndStartTimes(t *testing.T) {
	e := startTermBridge(t)
	before := time.Now()
	done := e.startAsync(map[string]any{"command": "exit 4", "hidden": true})
	running := e.startAsync(map[string]any{"command": "sleep 100"})
	e.readAll(done.SessionID)
	r := e.call("/api/terminal/sessions", nil, 5)
	var list struct {
		Sessions []terminal.SessionInfo `json:"sessions"`
	}
	e.result(r, &list)
	if len(list.Sessions) != 2 {
		t.Fatalf("sessions %s", r.resp.Result)
	}
	d, s := list.Sessions[0], list.Sessions[1]
	if d.SessionID != done.SessionID || d.Status != terminal.StatusExited || d.ExitCode == nil || *d.ExitCode != 4 ||
		d.EndedAt == nil || d.StartedAt.Before(before.Add(-time.Second)) || d.PID == 0 || d.Command != "exit 4" {
		t.Errorf("ended session %+v", d)
	}
	if s.SessionID != running.SessionID || s.Status != terminal.StatusRunning || s.ExitCode != nil ||
		s.StartedAt.Before(d.StartedAt) || s.Terminal != terminal.TerminalVisible {
		t.Errorf("running session %+v", s)
	}
	for _, k := range []string{`"status":"running"`, `"exit_code":4`, `"exit_code":null`, `"started_at":`} {
		if !strings.Contains(string(r.resp.Result), k) {
			t.Errorf("%s lacks %s", r.resp.Result, k)
		}
	}
}

func TestTerminalBusyVisibleTerminalRunsCallHiddenInItsCwd(t *testing.T) {
	e := startTermBridge(t)
	if err := os.Mkdir(filepath.Join(e.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.execute(map[string]any{"command": "cd sub"}); !r.Success {
		t.Fatalf("cd sub: %+v", r)
	}
	a := e.startAsync(map[string]any{"command": "sleep 100"})
	wantRanIn(t, a, false)
	r, _ := e.execute(map[string]any{"command": "pwd"})
	if r.Terminal != terminal.TerminalHidden || !strings.Contains(r.Note, "busy") || r.Output != filepath.Join(e.root, "sub")+"\n" {
		t.Errorf("result %+v, want a hidden run in the terminal's cwd that says why", r)
	}
}

func TestTerminalNoProcessOutlivesTheBridge(t *testing.T) {
	e := startTermBridge(t)
	e.startAsync(map[string]any{"command": "sleep 100", "hidden": true})
	e.startAsync(map[string]any{"command": "trap '' TERM HUP; sleep 100 & sleep 100", "hidden": true})
	e.startAsync(map[string]any{"command": "sleep 100"})
	testwait.Until(t, 5*time.Second, func() bool { return len(e.running("sleep 100")) == 4 }, "four sleeps")
	start := time.Now()
	e.bridge.stop(syscall.SIGTERM, 10*time.Second)
	t.Logf("the bridge exited %v after SIGTERM", time.Since(start))
	if left := e.tagged(); len(left) > 0 {
		t.Errorf("left after the bridge exited: %v", left)
	}
}

func TestTerminalNoProcessOutlivesAKilledBridge(t *testing.T) {
	e := startTermBridge(t)
	// The bridge's Pdeathsig ends only the session leader: the bash that
	// waits to run echo, and the visible shell, whose sourced command
	// does not get its SIGHUP.
	e.startAsync(map[string]any{"command": "sleep 100; echo", "hidden": true})
	e.startAsync(map[string]any{"command": "sleep 101"})
	testwait.Until(t, 5*time.Second, func() bool {
		return len(e.running("sleep 100")) == 1 && len(e.running("sleep 101")) == 1
	}, "both sleeps")
	if err := syscall.Kill(e.bridge.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-e.bridge.done
	start := time.Now()
	var left []taggedProc
	if !testwait.Within(2*time.Second, func() bool { left = e.tagged(); return len(left) == 0 }) {
		for _, p := range left {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		t.Fatalf("left 2s after the bridge was killed: %v", left)
	}
	t.Logf("nothing left %v after the bridge was killed", time.Since(start).Round(time.Millisecond))
}

// syncBuffer is an io.Writer a process writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// has reports whether every one of want was written.
func (b *syncBuffer) has(want ...string) bool {
	got := b.String()
	for _, w := range want {
		if !strings.Contains(got, w) {
			return false
		}
	}
	return true
}

// line returns the last complete line written that contains part, trimmed
// ("" if there is none yet).
func (b *syncBuffer) line(part string) string {
	lines := strings.Split(b.String(), "\n")
	for i := len(lines) - 2; i >= 0; i-- { // the last is not ended yet
		if strings.Contains(lines[i], part) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

// startAttach runs `tether attach` against the bridge and waits until it
// is connected.
func (e *termBridge) startAttach(stdin io.Reader, extra ...string) (*proc, *syncBuffer) {
	e.t.Helper()
	return startAttach(e.t, e.http, stdin, extra...)
}

func startAttach(t *testing.T, addr string, stdin io.Reader, extra ...string) (*proc, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(tetherBin, append([]string{"attach", "--bridge-http", addr}, extra...)...)
	cmd.Stdout, cmd.Stdin = out, stdin
	p := start(t, "attach", cmd)
	p.waitLine(10*time.Second, "tether attach: ", "the visible terminal")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("attach stdout:\n%q", out.String())
		}
	})
	return p, out
}

func TestTerminalAttachSeesTheAgentsCommand(t *testing.T) {
	e := startTermBridge(t)
	// Run before attaching: replayed from the transcript.
	e.execute(map[string]any{"command": "echo before-attach"})
	attach, out := e.startAttach(nil)
	if r, _ := e.execute(map[string]any{"command": "echo attach-sees-$((6*7))"}); !r.Success {
		t.Fatalf("%+v", r)
	}
	want := []string{"\r\nbefore-attach\r\n", "tether:" + e.root + "$ echo attach-sees-$((6*7))\r\n", "\r\nattach-sees-42\r\n"}
	testwait.Until(t, 5*time.Second, func() bool { return out.has(want...) }, "tether attach to print %q", want)
	// Hidden commands stay out of the terminal.
	e.execute(map[string]any{"command": "echo hidden-$((1+1))", "hidden": true})
	e.execute(map[string]any{"command": "echo after-hidden"})
	testwait.Until(t, 5*time.Second, func() bool { return out.has("after-hidden\r\n") }, "tether attach to print %q", "after-hidden\r\n")
	if got := out.String(); strings.Contains(got, "hidden-2") {
		t.Errorf("a hidden command showed in the terminal: %q", got)
	}
	attach.stop(syscall.SIGINT, 5*time.Second)
	if code := attach.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("tether attach exited %d after SIGINT", code)
	}
}

func TestTerminalAttachWriteTypesIntoTheTerminal(t *testing.T) {
	e := startTermBridge(t)
	stdin, typed, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { typed.Close() })
	_, out := e.startAttach(stdin, "--write")
	stdin.Close() // the child has its own
	if _, err := io.WriteString(typed, "echo typed-by-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 5*time.Second, func() bool { return out.has("typed-by-42\r\n") }, "tether attach to print %q", "typed-by-42\r\n")
	// Once the person's line is done the agent gets the terminal back.
	testwait.Until(t, 2*time.Second, func() bool {
		r, _ := e.execute(map[string]any{"command": "true"})
		return r.Terminal == terminal.TerminalVisible
	}, "the terminal to be free")
}

func TestTerminalAttachIsRefusedWithoutLoopbackHost(t *testing.T) {
	e := startTermBridge(t)
	req, _ := http.NewRequest(http.MethodGet, "http://"+e.http+"/attach", nil)
	req.Host = "attacker.example:80" // what a DNS-rebinding page would send
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("HTTP %d, want 403", res.StatusCode)
	}
}

func TestTerminalUpPrintsAnAttachThatWorks(t *testing.T) {
	cmd := exec.Command(tetherBin, "up", "--listen", "127.0.0.1:0", "--root", t.TempDir())
	printed := &syncBuffer{}
	cmd.Stdout = printed
	start(t, "up", cmd)
	var call, attach string
	if !testwait.Within(10*time.Second, func() bool {
		call, attach = printed.line(" call --broker "), printed.line(" attach --bridge-http ")
		return call != "" && attach != ""
	}) {
		t.Fatalf("tether up printed no call or no attach:\n%s", printed.String())
	}
	addr := attach[strings.LastIndex(attach, " ")+1:]
	_, out := startAttach(t, addr, nil)
	ping := strings.Index(call, " /api/ping ")
	if ping < 0 {
		t.Fatalf("unexpected call line %q", call)
	}
	execute := call[:ping] + ` /api/terminal/execute '{"command":"echo up-$((40+2))"}'`
	if res, err := exec.Command("sh", "-c", execute).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", execute, err, res)
	}
	if !testwait.Within(5*time.Second, func() bool { return out.has("\r\nup-42\r\n") }) {
		t.Fatalf("tether attach did not show the command; it printed %q", out.String())
	}
}
