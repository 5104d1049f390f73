//go:build !windows

package terminal_test

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

func TestSilentCommandsReturnWhenTheProcessExits(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		for _, c := range []string{"true", "mkdir -p .vscode"} {
			r, took := run(t, m, terminal.ExecRequest{Command: c, Hidden: hidden})
			wantTerminal(t, r, hidden)
			if !r.Success || r.ExitCode != 0 || r.TimedOut {
				t.Errorf("%q: %+v", c, r)
			}
			if took > 500*time.Millisecond {
				t.Errorf("%q took %v; a silent command must return when it exits", c, took)
			}
		}
		if fi, err := os.Stat(filepath.Join(r0(t, m), ".vscode")); err != nil || !fi.IsDir() {
			t.Errorf(".vscode was not created: %v", err)
		}
	})
}

// r0 is the manager's root, read back from a command's cwd.
func r0(t *testing.T, m *terminal.Manager) string {
	t.Helper()
	r, _ := run(t, m, terminal.ExecRequest{Command: "true", Hidden: true})
	return r.Cwd
}

const addNumbers = `#include <stdio.h>
int add(int a, int b) { return a + b; }
int main(void) { printf("%d\n", add(2, 3)); return 0; }
`

func TestGccReturnsWithinItsCompileTime(t *testing.T) {
	gcc, err := osexec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed")
	}
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		root := r0(t, m)
		if err := os.WriteFile(filepath.Join(root, "add_numbers.c"), []byte(addNumbers), 0o644); err != nil {
			t.Fatal(err)
		}
		// Interleaved rounds of the same compile run directly and through
		// the terminal; the best of each is compared, because the machine
		// is shared and a single compile can stall for hundreds of ms.
		compile, through := time.Hour, time.Hour
		for range 3 {
			c := osexec.Command(gcc, "-g", "-o", "baseline", "add_numbers.c")
			c.Dir = root
			start := time.Now()
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("baseline gcc: %v\n%s", err, out)
			}
			compile = min(compile, time.Since(start))
			r, took := run(t, m, terminal.ExecRequest{Command: "gcc -g -o add_numbers add_numbers.c", Hidden: hidden})
			if !r.Success || r.ExitCode != 0 || r.TimedOut || r.Output != "" {
				t.Fatalf("gcc: %+v", r)
			}
			wantTerminal(t, r, hidden)
			through = min(through, took)
		}
		if through > compile+200*time.Millisecond || through > time.Second {
			t.Errorf("gcc returned after %v at best; compiling takes %v", through, compile)
		}
		r, _ := run(t, m, terminal.ExecRequest{Command: "./add_numbers", Hidden: hidden})
		if r.Output != "5\n" {
			t.Errorf("./add_numbers printed %q", r.Output)
		}
	})
}

func TestFailingCommandReturnsExitCodeAndStderr(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		r, _ := run(t, m, terminal.ExecRequest{Command: "echo out; ls /no/such/dir-4711", Hidden: hidden})
		if r.Success || r.ExitCode != 2 || r.TimedOut {
			t.Errorf("result %+v, want exit 2", r)
		}
		for _, s := range []string{"out\n", "/no/such/dir-4711"} {
			if !strings.Contains(r.Output, s) {
				t.Errorf("output %q lacks %q", r.Output, s)
			}
		}
		if hidden && (!strings.Contains(r.Error, "No such file") || strings.Contains(r.Error, "out")) {
			t.Errorf("error %q, want the stderr alone", r.Error)
		}
		if !hidden && r.Error == "" {
			t.Error("error is empty for a failed command")
		}
	})
}

func TestTimeoutKillsTheProcessGroupAndReturnsPartialOutput(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		// The shell prints its own pid, its job's process group for hidden
		// commands; the sleep is a separate process in it.
		r, took := run(t, m, terminal.ExecRequest{Command: "echo pid=$$; sleep 30; echo never", Timeout: 1, Hidden: hidden})
		if took > 1500*time.Millisecond {
			t.Errorf("returned after %v, want < 1.5s", took)
		}
		if !r.TimedOut || r.Success {
			t.Errorf("result %+v, want timed_out", r)
		}
		if !strings.Contains(r.Output, "pid=") || strings.Contains(r.Output, "never") {
			t.Errorf("output %q, want the partial output", r.Output)
		}
		for _, p := range childProcesses() {
			if p.comm == "sleep" {
				t.Errorf("sleep %v survived the timeout", p)
			}
		}
		if hidden {
			pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(r.Output, "pid=")))
			if left := inSession(pid); pid == 0 || len(left) > 0 {
				t.Errorf("process group %d still has %v", pid, left)
			}
		}
	})
}

func TestTimeoutEscalatesToSIGKILL(t *testing.T) {
	m := newManager(t, terminal.Config{KillGrace: 200 * time.Millisecond})
	r, took := run(t, m, terminal.ExecRequest{Command: "trap '' TERM; echo pid=$$; while :; do sleep 0.05; done", Timeout: 0.5, Hidden: true})
	if !r.TimedOut || took > 1500*time.Millisecond {
		t.Errorf("result %+v after %v", r, took)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(r.Output, "pid=")))
	if left := inSession(pid); pid == 0 || len(left) > 0 {
		t.Errorf("process group %d still has %v", pid, left)
	}
}

func TestCtxDeadlineAnswersBeforeItExpires(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
		defer cancel()
		dl, _ := ctx.Deadline()
		r, err := m.Execute(ctx, terminal.ExecRequest{Command: "echo started; sleep 30", Hidden: hidden})
		if err != nil {
			t.Fatal(err)
		}
		if late := time.Since(dl); late > 0 {
			t.Errorf("answered %v after the ctx deadline", late)
		}
		if !r.TimedOut || !strings.Contains(r.Output, "started") {
			t.Errorf("result %+v, want timed_out with the output so far", r)
		}
	})
}

func TestCancelKillsTheCommandAndReturnsItsOutput(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		root := r0(t, m)
		fifo := filepath.Join(root, "ready")
		if out, err := osexec.Command("mkfifo", fifo).CombinedOutput(); err != nil {
			t.Fatalf("mkfifo: %v %s", err, out)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			// Opening blocks until the command opens its end.
			if b, err := os.ReadFile(fifo); err != nil || string(b) != "x\n" {
				t.Errorf("reading the fifo: %q %v", b, err)
			}
		}()
		start := time.Now()
		r, err := m.Execute(ctx, terminal.ExecRequest{Command: "echo started; echo x > ready; sleep 30", Hidden: hidden})
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if !r.TimedOut || !strings.Contains(r.Output, "started") || time.Since(start) > 2*time.Second {
			t.Errorf("result %+v after %v, want timed_out with the output so far", r, time.Since(start))
		}
		testwait.Until(t, 2*time.Second, func() bool {
			for _, p := range childProcesses() {
				if p.comm == "sleep" {
					return false
				}
			}
			return true
		}, "the sleep to be killed")
	})
}

func TestReadFromStdinReturnsAtOnce(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		r, took := run(t, m, terminal.ExecRequest{Command: "read x; echo got=$x", Hidden: hidden, Timeout: 10})
		if took > 500*time.Millisecond || r.TimedOut {
			t.Errorf("read x took %v: %+v", took, r)
		}
		if r.Output != "got=\n" {
			t.Errorf("output %q", r.Output)
		}
	})
}

func TestStdinIsTheCommandsInput(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		r, _ := run(t, m, terminal.ExecRequest{Command: "cat; echo end", Stdin: ptr("line one\nline two\n"), Hidden: hidden})
		if r.Output != "line one\nline two\nend\n" || !r.Success {
			t.Errorf("result %+v", r)
		}
	})
}

func TestLongOutputKeepsHeadAndTail(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		r, _ := run(t, m, terminal.ExecRequest{
			Command: "echo HEAD-START; head -c 100000 /dev/zero | tr '\\0' a; echo; echo TAIL-END",
			Hidden:  hidden,
		})
		if !r.Truncated || !r.Success {
			t.Fatalf("truncated=%v success=%v", r.Truncated, r.Success)
		}
		if !strings.HasPrefix(r.Output, "HEAD-START\n") || !strings.HasSuffix(r.Output, "TAIL-END\n") {
			t.Errorf("output does not keep head and tail: %q ... %q", r.Output[:20], r.Output[len(r.Output)-20:])
		}
		if !strings.Contains(r.Output, "bytes omitted") {
			t.Error("no marker where bytes were omitted")
		}
		if len(r.Output) > terminal.DefaultOutputCap+100 {
			t.Errorf("output is %d bytes, cap %d", len(r.Output), terminal.DefaultOutputCap)
		}
	})
}

func TestOutputCapIsConfigurable(t *testing.T) {
	m := newManager(t, terminal.Config{OutputCap: 1000})
	r, _ := run(t, m, terminal.ExecRequest{Command: "seq 1 2000"})
	if !r.Truncated || len(r.Output) > 1100 || !strings.HasPrefix(r.Output, "1\n2\n") || !strings.HasSuffix(r.Output, "1999\n2000\n") {
		t.Errorf("truncated=%v, %d bytes: %q", r.Truncated, len(r.Output), r.Output)
	}
	r, _ = run(t, m, terminal.ExecRequest{Command: "seq 1 10"})
	if r.Truncated {
		t.Error("short output marked truncated")
	}
}

func TestCwdParameterIsResolvedInsideRoot(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		root := r0(t, m)
		if err := os.MkdirAll(filepath.Join(root, "sub", "deeper"), 0o755); err != nil {
			t.Fatal(err)
		}
		r, _ := run(t, m, terminal.ExecRequest{Command: "pwd", Cwd: "sub/deeper", Hidden: hidden})
		if r.Output != filepath.Join(root, "sub", "deeper")+"\n" {
			t.Errorf("pwd in sub/deeper printed %q", r.Output)
		}
		r, _ = run(t, m, terminal.ExecRequest{Command: "pwd", Cwd: filepath.Join(root, "sub"), Hidden: hidden})
		if r.Output != filepath.Join(root, "sub")+"\n" {
			t.Errorf("pwd in absolute sub printed %q", r.Output)
		}
		// The cwd parameter holds for its own command only.
		r, _ = run(t, m, terminal.ExecRequest{Command: "pwd", Hidden: hidden})
		if r.Output != root+"\n" {
			t.Errorf("pwd after a cwd call printed %q, want the root", r.Output)
		}
	})
}

func TestEnvParameterAppliesToOneCommand(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		t.Setenv("TETHER_FROM_BRIDGE", "bridge")
		r, _ := run(t, m, terminal.ExecRequest{
			Command: `echo "$A|$B|$TETHER_FROM_BRIDGE"; sh -c 'echo "child:$A"'`,
			Env:     map[string]string{"A": "it's a 'value'", "B": "x\ny"},
			Hidden:  hidden,
		})
		if r.Output != "it's a 'value'|x\ny|bridge\nchild:it's a 'value'\n" {
			t.Errorf("output %q", r.Output)
		}
		r, _ = run(t, m, terminal.ExecRequest{Command: `echo "${A-unset}"`, Hidden: hidden})
		if r.Output != "unset\n" {
			t.Errorf("env leaked into the next command: %q", r.Output)
		}
	})
}

func TestBadInputIsInvalidPayload(t *testing.T) {
	m := newManager(t, terminal.Config{})
	root := r0(t, m)
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		req     terminal.ExecRequest
		mention []string
	}{
		{"empty command", terminal.ExecRequest{}, []string{"empty"}},
		{"blank command", terminal.ExecRequest{Command: " \n\t"}, []string{"empty"}},
		{"bad mode", terminal.ExecRequest{Command: "true", Mode: "later"}, []string{"later"}},
		{"negative timeout", terminal.ExecRequest{Command: "true", Timeout: -1}, []string{"timeout"}},
		{"cwd outside root", terminal.ExecRequest{Command: "true", Cwd: "/etc"}, []string{"/etc", "outside"}},
		{"cwd climbing out", terminal.ExecRequest{Command: "true", Cwd: "../.."}, []string{"../..", "outside"}},
		{"cwd missing", terminal.ExecRequest{Command: "true", Cwd: "nope/dir"}, []string{filepath.Join(root, "nope/dir"), "does not exist"}},
		{"cwd is a file", terminal.ExecRequest{Command: "true", Cwd: "file"}, []string{"file", "not a directory"}},
		{"cwd symlink out", terminal.ExecRequest{Command: "true", Cwd: "escape"}, []string{"escape", "outside"}},
		{"env name", terminal.ExecRequest{Command: "true", Env: map[string]string{"A-B": "x"}}, []string{"A-B"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := m.Execute(context.Background(), c.req)
			wantCode(t, err, protocol.CodeInvalidPayload, c.mention...)
		})
	}
}

func TestUnknownSessionIsSessionNotFound(t *testing.T) {
	m := newManager(t, terminal.Config{})
	_, err := m.Output("s-nope", 0)
	wantCode(t, err, protocol.CodeSessionNotFound, "s-nope")
	wantCode(t, m.Input(context.Background(), "s-nope", "x", false), protocol.CodeSessionNotFound)
	wantCode(t, m.Signal("s-nope", "SIGINT"), protocol.CodeSessionNotFound)
}

func TestCallsAfterCloseFail(t *testing.T) {
	m := newManager(t, terminal.Config{})
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Execute(context.Background(), terminal.ExecRequest{Command: "true"}); err != terminal.ErrClosed {
		t.Errorf("Execute after Close: %v", err)
	}
}

func TestCloseEndsSyncCallsInFlight(t *testing.T) {
	both(t, func(t *testing.T, m *terminal.Manager, hidden bool) {
		done := make(chan terminal.ExecResult, 1)
		go func() {
			r, _ := m.Execute(context.Background(), terminal.ExecRequest{Command: "sleep 100", Hidden: hidden})
			done <- r
		}()
		testwait.Until(t, 2*time.Second, func() bool {
			for _, p := range childProcesses() {
				if p.comm == "sleep" {
					return true
				}
			}
			return false
		}, "sleep to start")
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if !r.TimedOut || r.Success {
				t.Errorf("result %+v", r)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the call did not return after Close")
		}
	})
}
