//go:build !windows

package terminal_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

func startAsync(t *testing.T, m *terminal.Manager, req terminal.ExecRequest) terminal.ExecResult {
	t.Helper()
	req.Mode = terminal.ModeAsync
	r, err := m.Execute(context.Background(), req)
	if err != nil {
		t.Fatalf("Execute(%q): %v", req.Command, err)
	}
	// A quick command may have ended by the time Execute answers.
	if !r.Success || r.SessionID == "" || (r.Status != terminal.StatusRunning && r.Status != terminal.StatusExited) {
		t.Fatalf("async start: %+v", r)
	}
	return r
}

// readAll polls a session from offset 0 until it has ended and all its
// output is read, checking the offsets chain up.
func readAll(t *testing.T, m *terminal.Manager, id string) (string, terminal.OutputResult) {
	t.Helper()
	var out strings.Builder
	var last terminal.OutputResult
	var offset int64
	testwait.Until(t, 10*time.Second, func() bool {
		r, err := m.Output(id, offset)
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset != offset || r.Missed != 0 {
			t.Fatalf("asked for %d, got offset %d missed %d", offset, r.Offset, r.Missed)
		}
		if r.NextOffset != r.Offset+int64(len(r.Output)) {
			t.Fatalf("next_offset %d after %d bytes from %d", r.NextOffset, len(r.Output), r.Offset)
		}
		out.WriteString(r.Output)
		offset, last = r.NextOffset, r
		return !r.Running && !r.More
	}, "session %s to end", id)
	return out.String(), last
}

// waitEnded polls until the session has ended and returns its state.
func waitEnded(t *testing.T, m *terminal.Manager, id string) terminal.OutputResult {
	t.Helper()
	var r terminal.OutputResult
	testwait.Until(t, 10*time.Second, func() bool {
		var err error
		if r, err = m.Output(id, 0); err != nil {
			t.Fatal(err)
		}
		return !r.Running
	}, "session %s to end", id)
	return r
}

func TestAsyncOutputPolledByOffsetYieldsEachLineOnce(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		a := startAsync(t, m, terminal.ExecRequest{Command: "for i in 1 2 3 4 5; do echo $i; sleep 0.1; done", Hidden: hidden})
		wantTerminal(t, a, hidden)
		out, last := readAll(t, m, a.SessionID)
		if out != "1\n2\n3\n4\n5\n" {
			t.Errorf("output %q", out)
		}
		if last.ExitCode == nil || *last.ExitCode != 0 {
			t.Errorf("exit code %v", last.ExitCode)
		}
	})
}

func TestAsyncRingReportsBytesItDropped(t *testing.T) {
	m := newManager(t, terminal.Config{RingSize: 1000})
	a := startAsync(t, m, terminal.ExecRequest{Command: "head -c 5000 /dev/zero | tr '\\0' x; echo END", Hidden: true})
	waitEnded(t, m, a.SessionID)
	r, err := m.Output(a.SessionID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r.Offset != 5004-1000 || r.Missed != r.Offset-100 || r.NextOffset != 5004 || !strings.HasSuffix(r.Output, "xEND\n") {
		t.Errorf("offset %d missed %d next %d output %d bytes", r.Offset, r.Missed, r.NextOffset, len(r.Output))
	}
	_, err = m.Output(a.SessionID, 5005)
	wantCode(t, err, protocol.CodeInvalidPayload, "5005")
}

func TestOutputChunksAreCappedAndChainWithoutLoss(t *testing.T) {
	m := newManager(t, terminal.Config{OutputCap: 1000})
	// Multi-byte runes straddle every chunk boundary.
	a := startAsync(t, m, terminal.ExecRequest{Command: "for i in $(seq 1 700); do printf 'é€'; done; echo", Hidden: true})
	out, _ := readAll(t, m, a.SessionID)
	if want := strings.Repeat("é€", 700) + "\n"; out != want {
		t.Errorf("reassembled %d bytes, want %d", len(out), len(want))
	}
}

func TestSigintEndsAsyncSleep(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		a := startAsync(t, m, terminal.ExecRequest{Command: "sleep 100", Hidden: hidden})
		// The signal goes to the process group of the running job; wait
		// until sleep is in it.
		testwait.Until(t, 2*time.Second, func() bool {
			for _, p := range childProcesses() {
				if p.comm == "sleep" {
					return true
				}
			}
			return false
		}, "sleep to start")
		start := time.Now()
		if err := m.Signal(a.SessionID, "SIGINT"); err != nil {
			t.Fatal(err)
		}
		r := waitEnded(t, m, a.SessionID)
		if time.Since(start) > time.Second || r.ExitCode == nil || *r.ExitCode != 130 {
			t.Errorf("ended after %v with %v", time.Since(start), r.ExitCode)
		}
		wantCode(t, m.Signal(a.SessionID, "SIGINT"), protocol.CodeSessionEnded)
	})
}

func TestUnknownSignalIsInvalidPayload(t *testing.T) {
	m := newManager(t, terminal.Config{})
	a := startAsync(t, m, terminal.ExecRequest{Command: "sleep 100", Hidden: true})
	wantCode(t, m.Signal(a.SessionID, "SIGBOGUS"), protocol.CodeInvalidPayload, "SIGBOGUS")
	if err := m.Signal(a.SessionID, "kill"); err != nil {
		t.Fatal(err)
	}
	if r := waitEnded(t, m, a.SessionID); *r.ExitCode != 137 {
		t.Errorf("exit code %d after SIGKILL", *r.ExitCode)
	}
}

func TestInputReachesAsyncCat(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		a := startAsync(t, m, terminal.ExecRequest{Command: "cat; echo cat-done", Hidden: hidden})
		ctx := context.Background()
		if err := m.Input(ctx, a.SessionID, "hello\n", false); err != nil {
			t.Fatal(err)
		}
		if err := m.Input(ctx, a.SessionID, "world", true); err != nil {
			t.Fatal(err)
		}
		out, r := readAll(t, m, a.SessionID)
		if out != "hello\nworldcat-done\n" || *r.ExitCode != 0 {
			t.Errorf("output %q exit %v", out, *r.ExitCode)
		}
		wantCode(t, m.Input(ctx, a.SessionID, "late", false), protocol.CodeSessionEnded)
	})
}

func TestAsyncStdinParameterIsSentFirst(t *testing.T) {
	m := newManager(t, terminal.Config{})
	a := startAsync(t, m, terminal.ExecRequest{Command: "cat", Stdin: ptr("first\n"), Hidden: true})
	if err := m.Input(context.Background(), a.SessionID, "second\n", true); err != nil {
		t.Fatal(err)
	}
	if out, _ := readAll(t, m, a.SessionID); out != "first\nsecond\n" {
		t.Errorf("output %q", out)
	}
}

func TestAsyncTimeoutEndsTheSession(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		start := time.Now()
		a := startAsync(t, m, terminal.ExecRequest{Command: "sleep 30", Timeout: 0.5, Hidden: hidden})
		r := waitEnded(t, m, a.SessionID)
		if !r.TimedOut || time.Since(start) > 1500*time.Millisecond {
			t.Errorf("%+v after %v", r, time.Since(start))
		}
	})
}

func TestSessionsListStatusExitCodesAndStartTimes(t *testing.T) {
	m := newManager(t, terminal.Config{})
	before := time.Now()
	done := startAsync(t, m, terminal.ExecRequest{Command: "exit 4", Hidden: true})
	running := startAsync(t, m, terminal.ExecRequest{Command: "sleep 100"})
	waitEnded(t, m, done.SessionID)
	ss := m.Sessions()
	if len(ss) != 2 {
		t.Fatalf("sessions %+v", ss)
	}
	d, r := ss[0], ss[1]
	if d.SessionID != done.SessionID || d.Status != terminal.StatusExited || d.ExitCode == nil || *d.ExitCode != 4 ||
		d.EndedAt == nil || d.StartedAt.Before(before) || d.Terminal != terminal.TerminalHidden || d.PID == 0 {
		t.Errorf("ended session %+v", d)
	}
	if r.SessionID != running.SessionID || r.Status != terminal.StatusRunning || r.ExitCode != nil ||
		r.StartedAt.Before(d.StartedAt) || r.Terminal != terminal.TerminalVisible {
		t.Errorf("running session %+v", r)
	}
	b, _ := json.Marshal(ss)
	for _, k := range []string{`"session_id"`, `"status":"running"`, `"exit_code":4`, `"exit_code":null`, `"started_at"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s lacks %s", b, k)
		}
	}
}

func TestResultJSONHasTheIssuesFields(t *testing.T) {
	m := newManager(t, terminal.Config{})
	r, _ := run(t, m, terminal.ExecRequest{Command: "true"})
	var sync map[string]any
	b, _ := json.Marshal(r)
	_ = json.Unmarshal(b, &sync)
	for _, k := range []string{"success", "command", "output", "error", "exit_code", "duration_ms", "timed_out", "truncated"} {
		if _, ok := sync[k]; !ok {
			t.Errorf("sync result %s lacks %q", b, k)
		}
	}
	// Long enough to be running when the start answers (`true` may have
	// exited by then on a loaded machine: make test saw "exited").
	a := startAsync(t, m, terminal.ExecRequest{Command: "sleep 30", Hidden: true})
	var async map[string]any
	b, _ = json.Marshal(a)
	_ = json.Unmarshal(b, &async)
	if async["success"] != true || async["session_id"] != a.SessionID || async["status"] != "running" {
		t.Errorf("async result %s", b)
	}
	if _, ok := async["exit_code"]; ok {
		t.Errorf("async result %s carries an exit_code", b)
	}
	var req terminal.ExecRequest
	payload := `{"command":"ls","cwd":"sub","env":{"A":"1"},"mode":"async","timeout":2.5,"stdin":"x","hidden":true}`
	if err := json.Unmarshal([]byte(payload), &req); err != nil || req.Timeout != 2.5 || *req.Stdin != "x" || !req.Hidden || req.Env["A"] != "1" {
		t.Errorf("decoding %s: %+v %v", payload, req, err)
	}
}

func TestTooManyAsyncSessionsIsOverloaded(t *testing.T) {
	m := newManager(t, terminal.Config{MaxSessions: 2})
	startAsync(t, m, terminal.ExecRequest{Command: "sleep 100", Hidden: true})
	startAsync(t, m, terminal.ExecRequest{Command: "sleep 100", Hidden: true})
	_, err := m.Execute(context.Background(), terminal.ExecRequest{Command: "sleep 100", Hidden: true, Mode: terminal.ModeAsync})
	wantCode(t, err, protocol.CodeOverloaded)
}

func TestCloseKillsEveryProcessGroup(t *testing.T) {
	m := newManager(t, terminal.Config{})
	startAsync(t, m, terminal.ExecRequest{Command: "sleep 100; echo", Hidden: true})
	startAsync(t, m, terminal.ExecRequest{Command: "trap '' TERM; sleep 100 & sleep 100", Hidden: true})
	startAsync(t, m, terminal.ExecRequest{Command: "sleep 100"})
	testwait.Until(t, 2*time.Second, func() bool {
		n := 0
		for _, p := range childProcesses() {
			if p.comm == "sleep" {
				n++
			}
		}
		return n == 4
	}, "four sleeps")
	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v", took)
	}
	if left := childProcesses(); len(left) > 0 {
		t.Errorf("left after Close: %v", left)
	}
}
