//go:build !windows

package dap_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

func newManager(t *testing.T, root string) *dap.Manager {
	t.Helper()
	m, err := dap.NewManager(dap.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// cWorkspace copies add_numbers.c into a temp root and builds it with -g.
func cWorkspace(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src, err := os.ReadFile("testdata/add_numbers.c")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "add_numbers.c"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("gcc", "-g", "-O0", "-o", "add_numbers", "add_numbers.c")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return root
}

func needAdapter(t *testing.T, m *dap.Manager, name string) {
	t.Helper()
	for _, a := range dap.Adapters {
		if a.Name() == name {
			if _, err := m.Env().Probe(context.Background(), a); err != nil {
				if os.Getenv("CI") != "" {
					t.Fatalf("%s unavailable: %v", name, err)
				}
				t.Skipf("%s unavailable: %v", name, err)
			}
		}
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func code(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func local(t *testing.T, vars []dap.Variable, name string) string {
	t.Helper()
	for _, v := range vars {
		if v.Name == name {
			return v.Value
		}
	}
	t.Fatalf("no local %q in %+v", name, vars)
	return ""
}

func TestCSessionBreakpointSnapshotSteps(t *testing.T) {
	root := cWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	ctx := ctxFor(t, 60*time.Second)

	start, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "add_numbers", StopOnEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	if start.State != dap.StateStopped || start.Stop == nil || start.Stop.Reason != "entry" {
		t.Fatalf("start = %+v stop %+v, want stopped on entry", start, start.Stop)
	}
	s, err := m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	bps, err := s.SetBreakpoints(ctx, dap.SetBreakpointsRequest{Path: "add_numbers.c", Breakpoints: []dap.SourceBreakpoint{{Line: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(bps.Breakpoints) != 1 || !bps.Breakpoints[0].Verified {
		t.Fatalf("breakpoints = %+v, want one verified", bps.Breakpoints)
	}
	if _, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{}); err != nil {
		t.Fatal(err)
	}
	// Asked at once after continue: must wait for the stop, not fail.
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{Expressions: []string{"a+b"}})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stop.Reason != "breakpoint" || snap.Frames[0].Line != 4 {
		t.Fatalf("stop %+v at %+v, want breakpoint at line 4", snap.Stop, snap.Frames[0])
	}
	for name, want := range map[string]string{"a": "2", "b": "3", "sum": "5"} {
		if got := local(t, snap.Locals, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if len(snap.Expressions) != 1 || snap.Expressions[0].Result != "5" {
		t.Errorf("a+b = %+v, want 5", snap.Expressions)
	}

	out, err := s.Control(ctx, dap.CmdStepOut, dap.ControlRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Location == nil || out.Location.Name == "" || out.Location.Line != 8 {
		t.Fatalf("step-out location %+v, want main:8", out.Location)
	}
	over, err := s.Control(ctx, dap.CmdStepOver, dap.ControlRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if over.Location == nil || over.Location.Line != 9 {
		t.Fatalf("step-over location %+v, want line 9", over.Location)
	}
	into, err := s.Control(ctx, dap.CmdStepInto, dap.ControlRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if into.Location == nil || into.Location.Line != 3 {
		t.Fatalf("step-into location %+v, want add_numbers:3", into.Location)
	}
	ev, err := s.Evaluate(ctx, dap.EvaluateRequest{Expression: "a+b"})
	if err != nil || ev.Result != "15" {
		t.Fatalf("evaluate a+b = %+v, %v; want 15", ev, err)
	}
	if got := m.List().Sessions; len(got) != 1 || got[0].State != dap.StateStopped {
		t.Fatalf("list = %+v", got)
	}
	res, err := m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID})
	if err != nil || res.State != dap.StateEnded {
		t.Fatalf("stop = %+v, %v", res, err)
	}
	if _, err := s.Snapshot(ctx, dap.SnapshotRequest{}); code(err) != protocol.CodeSessionEnded {
		t.Fatalf("snapshot after stop: %v, want session_ended", err)
	}
}

func TestAdapterCrashEndsSessionWithItsStderr(t *testing.T) {
	root := cWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	ctx := ctxFor(t, 60*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "add_numbers", StopOnEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, p := range descendants() {
		if strings.Contains(p, "lldb-dap") {
			pid, _ := strconv.Atoi(strings.Fields(p)[0])
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	if killed != 1 {
		t.Fatalf("killed %d lldb-dap processes among %q, want 1", killed, descendants())
	}
	s, _ := m.Session(start.SessionID)
	_, err = s.Snapshot(ctx, dap.SnapshotRequest{WaitTimeoutMS: 3000})
	if code(err) != protocol.CodeSessionEnded || !strings.Contains(err.Error(), "exited unexpectedly") {
		t.Fatalf("snapshot after the crash: %v, want session_ended naming the crash", err)
	}
	if _, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{}); code(err) != protocol.CodeSessionEnded {
		t.Fatalf("continue after the crash: %v", err)
	}
	info := m.List().Sessions[0]
	if info.State != dap.StateEnded || !strings.Contains(info.EndReason, "lldb-dap") {
		t.Fatalf("list after the crash: %+v", info)
	}
	m.Close()
	if left := descendants(); len(left) != 0 {
		t.Fatalf("left after the crash and Close: %q", left)
	}
}

func TestMissingAdapterIsUnavailableAtOnce(t *testing.T) {
	m, err := dap.NewManager(dap.Config{Root: t.TempDir(), Path: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := ctxFor(t, 10*time.Second)
	for _, req := range []dap.StartRequest{
		{Language: "c", Program: "x"},
		{Language: "go", Program: "."},
		{Config: map[string]any{"type": "lldb", "request": "launch", "program": "x"}},
		{Config: map[string]any{"type": "pwa-node", "request": "launch", "program": "x.js"}},
	} {
		began := time.Now()
		_, err := m.Start(ctx, req)
		if code(err) != protocol.CodeDebugAdapterUnavailable {
			t.Errorf("%+v: %v, want debug_adapter_unavailable", req, err)
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("%+v answered after %s", req, took)
		}
	}
	dc := m.DebugContext(ctx, dap.ContextRequest{})
	for _, a := range dc.DebugAdapters {
		if a.Name != "debugpy" { // found through /usr/bin/python3 whatever PATH says
			t.Errorf("adapter %+v listed with an empty PATH", a)
		}
	}
}

func TestBreakpointWhileRunningThenPause(t *testing.T) {
	root := t.TempDir()
	src, _ := os.ReadFile("testdata/loop.c")
	_ = os.WriteFile(filepath.Join(root, "loop.c"), src, 0o644)
	cc := exec.Command("gcc", "-g", "-O0", "-o", "loop", "loop.c")
	cc.Dir = root
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	ctx := ctxFor(t, 60*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "loop"})
	if err != nil {
		t.Fatal(err)
	}
	if start.State != dap.StateRunning {
		t.Fatalf("state %s, want running", start.State)
	}
	s, _ := m.Session(start.SessionID)
	if _, err := s.Snapshot(ctx, dap.SnapshotRequest{WaitTimeoutMS: 200}); code(err) != protocol.CodeSessionRunning {
		t.Fatalf("snapshot of a running loop: %v, want session_running", err)
	}
	bps, err := s.SetBreakpoints(ctx, dap.SetBreakpointsRequest{Path: filepath.Join(root, "loop.c"), Breakpoints: []dap.SourceBreakpoint{{Line: 5, HitCondition: "3"}}})
	if err != nil || !bps.Breakpoints[0].Verified {
		t.Fatalf("breakpoint while running: %+v, %v", bps, err)
	}
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stop.Reason != "breakpoint" || snap.Frames[0].Name == "" || snap.Frames[0].Line != 5 {
		t.Fatalf("stop %+v at %+v", snap.Stop, snap.Frames[0])
	}
	if _, err := s.SetBreakpoints(ctx, dap.SetBreakpointsRequest{Path: "loop.c", Breakpoints: []dap.SourceBreakpoint{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Control(ctx, dap.CmdStepOver, dap.ControlRequest{}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{}); err != nil || r.State != dap.StateRunning {
		t.Fatalf("continue: %+v, %v", r, err)
	}
	if _, err := s.Control(ctx, dap.CmdStepOver, dap.ControlRequest{}); code(err) != protocol.CodeSessionRunning {
		t.Fatalf("step while running: %v, want session_running", err)
	}
	p, err := s.Control(ctx, dap.CmdPause, dap.ControlRequest{})
	if err != nil || p.State != dap.StateStopped || p.Stop == nil || p.Stop.Reason != "pause" {
		t.Fatalf("pause: %+v (%+v), %v", p, p.Stop, err)
	}
}
