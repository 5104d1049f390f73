package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/testproc"
	"github.com/tetherdev/tether/internal/testwait"
)

// keptEnded is how many ended sessions of each kind the bridge keeps
// listed (terminal's and dap's keepEnded; the one that ended last comes
// on top until the next starts).
const keptEnded = 100

// sessionLoops is how many terminal and debug sessions
// TestSessionsInALoopLeaveNothingBehind starts and stops (each);
// TETHER_SESSION_LOOPS=10000 is the count docs/reliability.md records.
func sessionLoops(t *testing.T) int {
	n := 50
	if v := os.Getenv("TETHER_SESSION_LOOPS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("TETHER_SESSION_LOOPS=%q: want a positive integer", v)
		}
	}
	return n
}

// TestSessionsInALoopLeaveNothingBehind starts and stops terminal sessions
// (half killed while running, half ending by themselves) and Node debug
// sessions (the built-in adapter, a program stopped on entry) one after
// another through a broker and a bridge. Afterwards the bridge has no
// process left of any of them, no more descriptors than after the first of
// each, no more goroutines than a twin bridge that ran only those first two
// (counted from each one's SIGQUIT dump), a bounded number of ended
// sessions listed and at most 64 MB more RSS. (It found every stopped debug
// session kept for ever, and a megabyte of output ring allocated for every
// async command, ended ones included.)
func TestSessionsInALoopLeaveNothingBehind(t *testing.T) {
	nodeOrSkip(t)
	n := sessionLoops(t)
	// Without warm adapters: a warm node, made after each debug session for
	// the next, is a process of the bridge's that comes and goes on its own
	// time (its bounds are TestWarmNode*'s in package dap).
	e := startTermBridge(t, "--warm-adapters=false")
	writeFiles(t, e.root, map[string]string{"idle.js": "setInterval(() => {}, 1000);\n"})
	twin := startTwinBridge(t, e)

	terminalSession := func(i int) {
		cmd := "echo done"
		if i%2 == 1 {
			cmd = "sleep 60"
		}
		r := e.startAsync(map[string]any{"command": cmd, "hidden": true})
		if cmd == "sleep 60" {
			var sig struct{ Signal string }
			e.result(e.call("/api/terminal/sessions/"+r.SessionID+"/signal", map[string]any{"signal": "SIGKILL"}, 10), &sig)
		}
		e.readAll(r.SessionID)
	}
	debugSession := func(b *termBridge) {
		var start dap.StartResult
		b.result(b.call("/api/debug/start-session", map[string]any{"language": "javascript", "program": "idle.js", "stop_on_entry": true}, 30), &start)
		var stopped json.RawMessage
		b.result(b.call("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, 30), &stopped)
	}
	// The first of each opens what stays open (the terminal manager and its
	// reaper, the debug session manager): the baseline is taken after them.
	terminalSession(1)
	debugSession(e)
	twin.warm(debugSession)
	testwait.Until(t, 5*time.Second, func() bool { return len(e.tagged()) <= 1 }, "the first sessions' processes to end")
	baseProcs := e.tagged()
	baseFDs, err := testproc.FDs(e.bridge.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	baseRSS, _, _ := testproc.MemKB(e.bridge.cmd.Process.Pid)

	start := time.Now()
	for i := range n {
		terminalSession(i)
		debugSession(e)
	}
	took := time.Since(start)

	var procs []taggedProc
	var fds int
	testwait.Until(t, 10*time.Second, func() bool {
		procs = e.tagged()
		fds, _ = testproc.FDs(e.bridge.cmd.Process.Pid)
		return len(procs) <= len(baseProcs) && fds <= baseFDs
	}, "the sessions' processes and descriptors to go")
	rss, _, _ := testproc.MemKB(e.bridge.cmd.Process.Pid)
	var list bridge.SessionsResult
	e.result(e.call("/api/terminal/sessions", map[string]any{}, 10), &list)
	var dbg dap.SessionList
	e.result(e.call("/api/debug/list-sessions", map[string]any{}, 10), &dbg)
	// Ended sessions stay listed for a while, a bounded number of them.
	if len(dbg.Sessions) > keptEnded+1 || len(list.Sessions) > keptEnded+1 {
		t.Errorf("%d debug and %d terminal sessions listed after %d of each ended, want at most %d", len(dbg.Sessions), len(list.Sessions), n+1, keptEnded+1)
	}
	for _, d := range dbg.Sessions {
		if d.State != dap.StateEnded {
			t.Errorf("debug session %s is %s after it was stopped", d.SessionID, d.State)
		}
	}

	got := goroutineDump(t, e.bridge, e)
	want := goroutineDump(t, twin.bridge, twin.termBridge)
	t.Logf("%d terminal and %d debug sessions in %s (%.0f ms a pair): the bridge has %d descriptors (%d after the first), %d processes of its own (%v), %d ended terminal sessions listed, RSS %d KB (%+d KB), %d goroutines (the twin that ran one of each: %d)",
		n, n, took.Round(time.Millisecond), float64(took.Milliseconds())/float64(n), fds, baseFDs, len(procs), procs, len(list.Sessions), rss, rss-baseRSS, got, want)
	if grown := rss - baseRSS; grown > 64<<10 {
		t.Errorf("the bridge's RSS grew by %d KB over %d sessions of each kind: what ended sessions keep is not bounded", grown, n)
	}
	if got > want+5 {
		t.Errorf("the bridge has %d goroutines after %d sessions of each kind, its twin %d after one: goroutines leak", got, n, want)
	}
}

// twinBridge is a second bridge on the same broker and root, for a
// baseline of goroutines.
type twinBridge struct{ *termBridge }

func startTwinBridge(t *testing.T, e *termBridge) twinBridge {
	t.Helper()
	tw := &termBridge{t: t, b: e.b, ws: "ws-twin", root: e.root, tag: e.tag + "-twin"}
	tw.tok = token(t, auth.RoleCaller, tw.ws)
	cmd := exec.Command(tetherBin, "bridge", "--broker", e.b.url, "--workspace", tw.ws, "--token", token(t, auth.RoleBridge, tw.ws),
		"--root", tw.root, "--log-level", "info", "--warm-adapters=false")
	cmd.Env = append(os.Environ(), tagEnv+"="+tw.tag)
	tw.bridge = start(t, "twin bridge", cmd)
	testwait.Until(t, 10*time.Second, func() bool { return e.b.holds(tw.ws) }, "%s holding %s", e.b.name, tw.ws)
	return twinBridge{tw}
}

// warm runs one terminal session and one debug session, as the loop's
// first iteration does.
func (tw twinBridge) warm(debugSession func(*termBridge)) {
	r := tw.startAsync(map[string]any{"command": "sleep 60", "hidden": true})
	var sig struct{ Signal string }
	tw.result(tw.call("/api/terminal/sessions/"+r.SessionID+"/signal", map[string]any{"signal": "SIGKILL"}, 10), &sig)
	tw.readAll(r.SessionID)
	debugSession(tw.termBridge)
}

// goroutineDump ends the bridge with SIGQUIT, counts the goroutines of the
// dump the Go runtime writes to its stderr, and waits until nothing it
// started is left (its reaper ends what it ran).
func goroutineDump(t *testing.T, p *proc, e *termBridge) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit on SIGQUIT", p.name)
	}
	p.mu.Lock()
	n := 0
	for _, l := range p.lines {
		if strings.HasPrefix(l, "goroutine ") && strings.HasSuffix(l, "]:") {
			n++
		}
	}
	p.mu.Unlock()
	if n == 0 {
		t.Fatalf("%s wrote no goroutine dump on SIGQUIT", p.name)
	}
	testwait.Until(t, 5*time.Second, func() bool { return len(e.tagged()) == 0 }, "the processes of %s to end after it exited", p.name)
	return n
}
