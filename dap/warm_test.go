//go:build !windows

package dap_test

import (
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

func newWarmManager(t *testing.T, root string, idle time.Duration) *dap.Manager {
	t.Helper()
	m, err := dap.NewManager(dap.Config{Root: root, WarmAdapters: true, WarmIdle: idle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// warmOf is the ready warm adapter of that name, or ok false.
func warmOf(m *dap.Manager, adapter string) (dap.WarmAdapter, bool) {
	ready := m.WarmAdapters()
	i := slices.IndexFunc(ready, func(w dap.WarmAdapter) bool { return w.Adapter == adapter })
	if i < 0 {
		return dap.WarmAdapter{}, false
	}
	return ready[i], true
}

// awaitWarm waits for a ready warm adapter of that name and returns it.
func awaitWarm(t *testing.T, m *dap.Manager, adapter string) dap.WarmAdapter {
	t.Helper()
	var w dap.WarmAdapter
	testwait.Until(t, 30*time.Second, func() bool {
		var ok bool
		w, ok = warmOf(m, adapter)
		return ok
	}, "a warm %s", adapter)
	return w
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// startToBreakpoint starts req with a breakpoint at path:line and checks
// that the snapshot stops there with its locals; the session is stopped.
func startToBreakpoint(t *testing.T, m *dap.Manager, req dap.StartRequest, path string, line int, during func()) {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	req.Breakpoints = []dap.FileBreakpoints{{Path: path, Breakpoints: []dap.SourceBreakpoint{{Line: line}}}}
	start, err := m.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 || snap.Frames[0].Line != line {
		t.Fatalf("snapshot = stop %+v frames %+v, want the breakpoint at line %d", snap.Stop, snap.Frames, line)
	}
	if len(snap.Locals) == 0 {
		t.Fatalf("snapshot has no locals")
	}
	if during != nil {
		during()
	}
	if _, err := m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID}); err != nil {
		t.Fatal(err)
	}
}

// checkWarmStart: the first start of a kind is cold and, once its session
// ended, leaves a warm adapter behind; the second start takes it (it keeps
// running as the session's adapter) and stops at the breakpoint as the cold
// one did, and once that session ended a new warm adapter replaces it.
func checkWarmStart(t *testing.T, m *dap.Manager, adapter string, req dap.StartRequest, path string, line int) {
	t.Helper()
	startToBreakpoint(t, m, req, path, line, nil)
	first := awaitWarm(t, m, adapter)
	startToBreakpoint(t, m, req, path, line, func() {
		if !alive(first.Pid) {
			t.Errorf("the warm %s (pid %d) is gone while its session runs", adapter, first.Pid)
		}
		if w, ok := warmOf(m, adapter); ok {
			t.Errorf("warm adapters while the one taken runs its session: %+v", w)
		}
	})
	if alive(first.Pid) {
		t.Errorf("the taken warm %s (pid %d) outlived its session", adapter, first.Pid)
	}
	testwait.Until(t, 30*time.Second, func() bool {
		w, ok := warmOf(m, adapter)
		return ok && w.Pid != first.Pid
	}, "a new warm %s replacing pid %d", adapter, first.Pid)
}

func TestWarmStartStopsAtBreakpointForC(t *testing.T) {
	root := cWorkspace(t)
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "lldb-dap")
	checkWarmStart(t, m, "lldb-dap", dap.StartRequest{Language: "c", Program: "add_numbers"}, "add_numbers.c", 4)
}

func TestWarmStartStopsAtBreakpointForPython(t *testing.T) {
	root := writeFiles(t, map[string]string{"add.py": pyAdd})
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "debugpy")
	checkWarmStart(t, m, "debugpy", dap.StartRequest{Language: "python", Program: "add.py"}, "add.py", 3)
}

// The Go start also runs the prebuilt binary (warm_build.go); a change to
// the source must be in the next start, as when delve builds it.
func TestWarmStartStopsAtBreakpointForGo(t *testing.T) {
	root := writeFiles(t, map[string]string{"main.go": goAdd, "go.mod": "module addgo\n\ngo 1.21\n"})
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "delve")
	req := dap.StartRequest{Language: "go", Program: "."}
	checkWarmStart(t, m, "delve", req, "main.go", 7)

	// One line more above add: the breakpoint's line moves with it, and
	// only a binary built from the new source stops there.
	write(t, root+"/main.go", "package main\n\n"+goAdd[len("package main\n"):])
	startToBreakpoint(t, m, req, "main.go", 8, nil)
}

func TestWarmAdapterEndsAfterIdleTime(t *testing.T) {
	root := writeFiles(t, map[string]string{"add.py": pyAdd})
	m := newWarmManager(t, root, 200*time.Millisecond)
	needAdapter(t, m, "debugpy")
	startToBreakpoint(t, m, dap.StartRequest{Language: "python", Program: "add.py"}, "add.py", 3, nil)
	testwait.Until(t, 30*time.Second, func() bool {
		return m.WarmIdled() == 1 && len(m.WarmAdapters()) == 0
	}, "the warm debugpy to end for idleness")
	if left := descendants(); len(left) > 0 {
		t.Fatalf("processes left after the warm adapter's idle end: %v", left)
	}
}

func TestWarmAdaptersEndWithTheManager(t *testing.T) {
	root := cWorkspace(t)
	m, err := dap.NewManager(dap.Config{Root: root, WarmAdapters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	needAdapter(t, m, "lldb-dap")
	startToBreakpoint(t, m, dap.StartRequest{Language: "c", Program: "add_numbers"}, "add_numbers.c", 4, nil)
	w := awaitWarm(t, m, "lldb-dap")
	m.Close()
	if alive(w.Pid) {
		t.Fatalf("warm lldb-dap (pid %d) outlived the manager", w.Pid)
	}
	if left := descendants(); len(left) > 0 {
		t.Fatalf("processes left after Close: %v", left)
	}
}

func TestWarmAdaptersOffStartsNone(t *testing.T) {
	root := cWorkspace(t)
	m := newManager(t, root) // WarmAdapters false
	needAdapter(t, m, "lldb-dap")
	startToBreakpoint(t, m, dap.StartRequest{Language: "c", Program: "add_numbers"}, "add_numbers.c", 4, nil)
	if w := m.WarmAdapters(); len(w) != 0 {
		t.Fatalf("warm adapters = %+v with warm adapters off", w)
	}
	if left := descendants(); len(left) > 0 {
		t.Fatalf("processes left with warm adapters off: %v", left)
	}
}

// A warm adapter that died while it waited is no answer: the start that
// would have taken it starts cold and stops at the breakpoint.
func TestWarmAdapterThatDiedFallsBackToCold(t *testing.T) {
	root := cWorkspace(t)
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "lldb-dap")
	req := dap.StartRequest{Language: "c", Program: "add_numbers"}
	startToBreakpoint(t, m, req, "add_numbers.c", 4, nil)
	w := awaitWarm(t, m, "lldb-dap")
	if err := syscall.Kill(w.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	startToBreakpoint(t, m, req, "add_numbers.c", 4, nil)
}

// A start that takes a warm adapter and fails (lldb-dap cannot launch a C
// source file) answers with the adapter's refusal, and the adapter it took
// ends with it.
func TestWarmStartThatFailsAnswersAndEndsTheAdapterItTook(t *testing.T) {
	root := cWorkspace(t)
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "lldb-dap")
	startToBreakpoint(t, m, dap.StartRequest{Language: "c", Program: "add_numbers"}, "add_numbers.c", 4, nil)
	w := awaitWarm(t, m, "lldb-dap")
	_, err := m.Start(ctxFor(t, 60*time.Second), dap.StartRequest{Language: "c", Program: "add_numbers.c"})
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidPayload {
		t.Fatalf("start of a source file = %v, want invalid_payload", err)
	}
	if alive(w.Pid) {
		t.Fatalf("the warm lldb-dap (pid %d) the failed start took outlived it", w.Pid)
	}
	if got := m.List().Sessions; len(got) != 1 {
		t.Fatalf("sessions after the failed start = %+v, want only the first", got)
	}
}
