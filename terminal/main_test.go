//go:build !windows

package terminal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

func TestMain(m *testing.M) {
	// Managers under test re-execute this test binary as their reaper.
	terminal.ReaperMain()
	if os.Getenv(hostEnv) != "" {
		runHost()
	}
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(2 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
		if left := childProcesses(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "child processes left: %v\n", left)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to d for goroutines running terminal code to
// end and returns the stacks of those that did not.
func leakedGoroutines(d time.Duration) string {
	var leaked []string
	testwait.Within(d, func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		leaked = leaked[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "tether/terminal.") && !strings.Contains(g, "terminal_test.TestMain") &&
				!strings.Contains(g, "terminal_test.leakedGoroutines") {
				leaked = append(leaked, g)
			}
		}
		return len(leaked) == 0
	})
	return strings.Join(leaked, "\n\n")
}

type proc struct {
	pid, ppid, pgrp, sid int
	comm                 string
}

func (p proc) String() string { return fmt.Sprintf("%d(%s)", p.pid, p.comm) }

// processes lists live (non-zombie) processes.
func processes() []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		open, k := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || k < 0 {
			continue
		}
		f := strings.Fields(string(b[k+2:]))
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		sid, _ := strconv.Atoi(f[3])
		out = append(out, proc{pid: pid, ppid: ppid, pgrp: pgrp, sid: sid, comm: string(b[open+1 : k])})
	}
	return out
}

// childProcesses lists live descendants of this test process.
func childProcesses() []proc {
	ps := processes()
	byPid := map[int]proc{}
	for _, p := range ps {
		byPid[p.pid] = p
	}
	self := os.Getpid()
	var out []proc
	for _, p := range ps {
		for q, hops := p, 0; q.ppid > 1 && hops < 64; hops++ {
			if q.ppid == self {
				out = append(out, p)
				break
			}
			var ok bool
			if q, ok = byPid[q.ppid]; !ok {
				break
			}
		}
	}
	return out
}

// inSession lists live processes whose session or group is id, wherever
// they were reparented.
func inSession(id int) []proc {
	var out []proc
	for _, p := range processes() {
		if p.sid == id || p.pgrp == id {
			out = append(out, p)
		}
	}
	return out
}

// newManager returns a Manager rooted in a fresh directory, closed at
// the end of the test, which then checks that no child process is left.
func newManager(t *testing.T, cfg terminal.Config) *terminal.Manager {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 300 * time.Millisecond
	}
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	m, err := terminal.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		start := time.Now()
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("Close took %v", d)
		}
		if left := childProcesses(); len(left) > 0 {
			t.Errorf("processes left after Close: %v", left)
		}
	})
	return m
}

// run runs a sync command and fails the test on an error.
func run(t *testing.T, m *terminal.Manager, req terminal.ExecRequest) (terminal.ExecResult, time.Duration) {
	t.Helper()
	start := time.Now()
	r, err := m.Execute(context.Background(), req)
	if err != nil {
		t.Fatalf("Execute(%q): %v", req.Command, err)
	}
	return r, time.Since(start)
}

// both runs f as a subtest for the visible terminal and for hidden
// processes, each with its own Manager.
func both(t *testing.T, f func(t *testing.T, m *terminal.Manager, hidden bool)) {
	for _, hidden := range []bool{false, true} {
		name := terminal.TerminalVisible
		if hidden {
			name = terminal.TerminalHidden
		}
		t.Run(name, func(t *testing.T) { f(t, newManager(t, terminal.Config{}), hidden) })
	}
}

func wantTerminal(t *testing.T, r terminal.ExecResult, hidden bool) {
	t.Helper()
	want := terminal.TerminalVisible
	if hidden {
		want = terminal.TerminalHidden
	}
	if r.Terminal != want {
		t.Errorf("ran in the %s terminal, want %s (note %q)", r.Terminal, want, r.Note)
	}
}

// wantCode checks that err is a *protocol.Error with code and that its
// message mentions each of mention.
func wantCode(t *testing.T, err error, code string, mention ...string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *protocol.Error with code %s", err, code)
	}
	if pe.Code != code {
		t.Errorf("code %q, want %q (%s)", pe.Code, code, pe.Message)
	}
	for _, s := range mention {
		if !strings.Contains(pe.Message, s) {
			t.Errorf("message %q does not mention %q", pe.Message, s)
		}
	}
}

func ptr[T any](v T) *T { return &v }
