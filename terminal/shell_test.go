//go:build !windows

package terminal_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/terminal"
)

func TestVisibleShellKeepsCdAndExportBetweenCalls(t *testing.T) {
	m := newManager(t, terminal.Config{})
	// cd outside the root is refused as a cwd parameter but is the
	// person's business inside their terminal.
	for _, c := range []string{"cd /tmp", "export TETHER_KEPT=yes"} {
		if r, _ := run(t, m, terminal.ExecRequest{Command: c}); !r.Success {
			t.Fatalf("%q: %+v", c, r)
		}
	}
	r, _ := run(t, m, terminal.ExecRequest{Command: "pwd; echo $TETHER_KEPT; sh -c 'echo child:$TETHER_KEPT'"})
	if r.Output != "/tmp\nyes\nchild:yes\n" || r.Cwd != "/tmp" || r.Terminal != terminal.TerminalVisible {
		t.Errorf("result %+v", r)
	}
}

func TestSentinelTextPrintedByACommandDoesNotEndIt(t *testing.T) {
	m := newManager(t, terminal.Config{})
	start := time.Now()
	r, _ := run(t, m, terminal.ExecRequest{Command: `printf 'a\033]633;D;0123abcdef;0\007b\n'; ` +
		`printf '\033]633;D;;0\007'; printf '__tether_nonce=x""y\n'; sleep 0.3; echo after`})
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("returned after %v, before the command ended", took)
	}
	if !r.Success || !strings.HasSuffix(r.Output, "after\n") {
		t.Errorf("result %+v", r)
	}
	if !strings.Contains(r.Output, "a\x1b]633;D;0123abcdef;0\ab\n") {
		t.Errorf("a marker with a foreign nonce was not passed through: %q", r.Output)
	}
}

func TestEchoedCommandLineNeverShowsAsOutput(t *testing.T) {
	m := newManager(t, terminal.Config{})
	// A command turning echo on must not make the next command's typed
	// line (which holds its nonce) show up or end it early.
	if r, _ := run(t, m, terminal.ExecRequest{Command: "stty echo </dev/tty"}); !r.Success {
		t.Fatalf("stty echo: %+v", r)
	}
	r, _ := run(t, m, terminal.ExecRequest{Command: "echo hi"})
	if r.Output != "hi\n" {
		t.Errorf("output %q, want exactly the command's output", r.Output)
	}
}

func TestBusyVisibleTerminalRunsCallHiddenInItsCwd(t *testing.T) {
	m := newManager(t, terminal.Config{})
	if r, _ := run(t, m, terminal.ExecRequest{Command: "cd /tmp"}); !r.Success {
		t.Fatal(r)
	}
	a, err := m.Execute(context.Background(), terminal.ExecRequest{Command: "cat", Mode: terminal.ModeAsync})
	if err != nil || a.Terminal != terminal.TerminalVisible {
		t.Fatalf("async cat: %+v %v", a, err)
	}
	r, took := run(t, m, terminal.ExecRequest{Command: "pwd"})
	if r.Terminal != terminal.TerminalHidden || !strings.Contains(r.Note, "busy") || r.Output != "/tmp\n" {
		t.Errorf("result %+v", r)
	}
	if took > 500*time.Millisecond {
		t.Errorf("the call waited %v for the busy terminal", took)
	}
	if err := m.Signal(a.SessionID, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, m, a.SessionID)
	r, _ = run(t, m, terminal.ExecRequest{Command: "pwd"})
	if r.Terminal != terminal.TerminalVisible {
		t.Errorf("the terminal did not come back: %+v", r)
	}
}

func TestParallelCallsNeitherInterleaveNorWait(t *testing.T) {
	m := newManager(t, terminal.Config{})
	snap, live := m.Attach(t.Context())
	_ = snap
	var wg sync.WaitGroup
	var first terminal.ExecResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		first, _ = m.Execute(context.Background(), terminal.ExecRequest{Command: "echo one-start; read x </dev/tty; echo one-end"})
	}()
	// Wait until the first command has visibly started.
	var seen strings.Builder
	for !strings.Contains(seen.String(), "one-start\r\n") {
		seen.Write(<-live)
	}
	r, took := run(t, m, terminal.ExecRequest{Command: "echo two"})
	if r.Output != "two\n" || r.Terminal != terminal.TerminalHidden || took > 500*time.Millisecond {
		t.Errorf("second call: %+v after %v", r, took)
	}
	if err := m.WriteTerminal(context.Background(), []byte("go\n")); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if first.Output != "one-start\none-end\n" || first.Terminal != terminal.TerminalVisible {
		t.Errorf("first call: %+v", first)
	}
}

func TestUnfinishedQuoteFailsInsteadOfWedgingTheShell(t *testing.T) {
	m := newManager(t, terminal.Config{})
	r, took := run(t, m, terminal.ExecRequest{Command: "echo 'unfinished", Timeout: 5})
	if r.Success || r.TimedOut || took > time.Second || !strings.Contains(r.Output, "unexpected EOF") {
		t.Errorf("result %+v after %v", r, took)
	}
	r, _ = run(t, m, terminal.ExecRequest{Command: "echo ok"})
	if r.Output != "ok\n" || r.Terminal != terminal.TerminalVisible {
		t.Errorf("shell after the quote: %+v", r)
	}
}

func TestCommandReadingTheTerminalIsInterruptedAtItsTimeout(t *testing.T) {
	m := newManager(t, terminal.Config{})
	r, took := run(t, m, terminal.ExecRequest{Command: "stty raw </dev/tty; read x </dev/tty; echo never", Timeout: 1})
	if !r.TimedOut || took > 1500*time.Millisecond || strings.Contains(r.Output, "never") {
		t.Errorf("result %+v after %v", r, took)
	}
	r, _ = run(t, m, terminal.ExecRequest{Command: "echo ok; stty -a </dev/tty | grep -o -- '-echo '"})
	if r.Output != "ok\n-echo \n" || r.Terminal != terminal.TerminalVisible {
		t.Errorf("shell after the interrupt: %+v", r)
	}
}

func TestShellThatIgnoresInterruptsIsReset(t *testing.T) {
	grace := 200 * time.Millisecond
	m := newManager(t, terminal.Config{KillGrace: grace})
	if r, _ := run(t, m, terminal.ExecRequest{Command: "export GONE=1"}); !r.Success {
		t.Fatal(r)
	}
	r, took := run(t, m, terminal.ExecRequest{Command: "trap '' INT; read x </dev/tty", Timeout: 0.5})
	if !r.TimedOut || !strings.Contains(r.Note, "restarted") {
		t.Errorf("result %+v", r)
	}
	if took > 500*time.Millisecond+5*grace {
		t.Errorf("took %v", took)
	}
	r, _ = run(t, m, terminal.ExecRequest{Command: "echo ${GONE-fresh}"})
	if r.Output != "fresh\n" || r.Terminal != terminal.TerminalVisible {
		t.Errorf("after the reset: %+v", r)
	}
}

func TestExitInVisibleShellReportsItsCodeAndRestarts(t *testing.T) {
	m := newManager(t, terminal.Config{})
	r, _ := run(t, m, terminal.ExecRequest{Command: "echo bye; exit 3"})
	if r.ExitCode != 3 || r.Output != "bye\n" || !strings.Contains(r.Note, "exited") {
		t.Errorf("result %+v", r)
	}
	r, _ = run(t, m, terminal.ExecRequest{Command: "echo back"})
	if r.Output != "back\n" || r.Terminal != terminal.TerminalVisible {
		t.Errorf("after exit: %+v", r)
	}
}

func TestBackgroundJobInVisibleShellDiesWithClose(t *testing.T) {
	m := newManager(t, terminal.Config{})
	r, took := run(t, m, terminal.ExecRequest{Command: "sleep 300 & echo started"})
	if !r.Success || took > 500*time.Millisecond {
		t.Fatalf("result %+v after %v", r, took)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range childProcesses() {
		t.Errorf("left after Close: %v", p)
	}
}
