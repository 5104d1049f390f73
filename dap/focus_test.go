//go:build !windows

package dap_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// sessionOf starts req and answers its session.
func sessionOf(t *testing.T, m *dap.Manager, req dap.StartRequest) *dap.Session {
	t.Helper()
	res, err := m.Start(ctxFor(t, 90*time.Second), req)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	s, err := m.Session(res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// snapOf starts req and answers its session and its first stop's snapshot.
func snapOf(t *testing.T, m *dap.Manager, req dap.StartRequest, snapReq dap.SnapshotRequest) (*dap.Session, *dap.Snapshot) {
	t.Helper()
	s := sessionOf(t, m, req)
	snapReq.SessionID, snapReq.WaitTimeoutMS = s.ID(), 30000
	snap, err := s.Snapshot(ctxFor(t, 40*time.Second), snapReq)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s, snap
}

// focusIs checks that the snapshot's locals are of the frame named name,
// below at least one frame outside the workspace, holding local, and that
// an evaluation without a frame reads there too.
func focusIs(t *testing.T, s *dap.Session, snap *dap.Snapshot, name, local, value string) {
	t.Helper()
	names := frameNames(snap)
	if snap.FrameIndex <= 0 || snap.FrameIndex >= len(snap.Frames) || snap.Frames[snap.FrameIndex].Name != name {
		t.Fatalf("frame_index %d of %q, want %s below the frames outside the workspace", snap.FrameIndex, names, name)
	}
	found := false
	for _, v := range snap.Locals {
		if v.Name == local {
			found = true
			if !strings.Contains(v.Value, value) {
				t.Errorf("local %s = %q, want %q", local, v.Value, value)
			}
		}
	}
	if !found {
		t.Errorf("locals %+v lack %s, the locals of %s", snap.Locals, local, name)
	}
	r, err := s.Evaluate(ctxFor(t, 20*time.Second), dap.EvaluateRequest{SessionID: snap.SessionID, Expression: local})
	if err != nil || r.Error != "" || !strings.Contains(r.Result, value) {
		t.Errorf("evaluate %s without a frame = %+v, %v; want %q, as the snapshot's frame has it", local, r, err, value)
	}
}

func TestGoPanicSnapshotShowsTheWorkspaceFrameThatPanicked(t *testing.T) {
	root := goModuleWorkspace(t, "package main\n\nfunc store(key string) {\n\tvar m map[string]int\n\tm[key] = 1\n}\n\nfunc main() {\n\tstore(\"answer\")\n}\n")
	m := newManager(t, root)
	needAdapter(t, m, "delve")
	s, snap := snapOf(t, m, dap.StartRequest{Language: "go", Program: "goapp"}, dap.SnapshotRequest{})
	if snap.Stop == nil || snap.Stop.Reason != "exception" {
		t.Fatalf("stop %+v, want the panic", snap.Stop)
	}
	focusIs(t, s, snap, "main.store", "key", `"answer"`)
	if !strings.HasPrefix(snap.Frames[0].Name, "runtime.") {
		t.Errorf("top frame %q, want the runtime's (the test is about the frames below it)", snap.Frames[0].Name)
	}
}

func TestPythonErrorRaisedInALibraryShowsTheCallersFrame(t *testing.T) {
	root := writeFiles(t, map[string]string{"parse.py": "import json\n\ndef parse(text):\n    return json.loads(text)\n\nparse('{\"a\": ')\n"})
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	s, snap := snapOf(t, m, dap.StartRequest{Config: map[string]any{"type": "debugpy", "request": "launch", "name": "parse",
		"program": filepath.Join(root, "parse.py"), "cwd": root, "justMyCode": false}}, dap.SnapshotRequest{})
	if snap.Stop == nil || snap.Stop.Exception == nil || !strings.Contains(snap.Stop.Exception.Type, "JSONDecodeError") {
		t.Fatalf("stop %+v, want the JSONDecodeError", snap.Stop)
	}
	focusIs(t, s, snap, "parse", "text", `{"a": `)
}

func TestCAbortSnapshotShowsTheFunctionThatCalledAbort(t *testing.T) {
	root := writeFiles(t, map[string]string{"check.c": "#include <stdlib.h>\nstatic void check(int level) {\n  if (level > 2)\n    abort();\n}\nint main(void) {\n  check(3);\n  return 0;\n}\n"})
	gcc(t, root, "gcc", "check", "check.c")
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	s, snap := snapOf(t, m, dap.StartRequest{Language: "c", Program: "check"}, dap.SnapshotRequest{})
	focusIs(t, s, snap, "check", "level", "3")
	// A watched expression is read in the same frame: level is check's.
	res, err := s.SetWatchpoints(ctxFor(t, 20*time.Second), dap.WatchpointsRequest{SessionID: snap.SessionID, Watchpoints: []dap.Watchpoint{{Expression: "level"}}})
	if err != nil || len(res.Watchpoints) != 1 || !res.Watchpoints[0].Verified {
		t.Errorf("a watchpoint on check's level at the abort: %+v, %v", res, err)
	}
}

func TestBreakpointStopKeepsItsTopFrameAndFrameIndexPicksAnother(t *testing.T) {
	root := writeFiles(t, map[string]string{"calls.py": "def inner(x):\n    y = x * 2\n    return y\n\ndef outer(n):\n    return inner(n + 1)\n\nprint(outer(4))\n"})
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	req := dap.StartRequest{Language: "python", Program: "calls.py", Breakpoints: []dap.FileBreakpoints{{Path: "calls.py", Breakpoints: []dap.SourceBreakpoint{{Line: 3}}}}}
	s, snap := snapOf(t, m, req, dap.SnapshotRequest{})
	if snap.FrameIndex != 0 || len(snap.Frames) < 2 || snap.Frames[0].Name != "inner" {
		t.Fatalf("frame_index %d of %q, want 0 (inner) at a breakpoint", snap.FrameIndex, frameNames(snap))
	}
	one := 1
	picked, err := s.Snapshot(ctxFor(t, 20*time.Second), dap.SnapshotRequest{SessionID: snap.SessionID, FrameIndex: &one})
	if err != nil {
		t.Fatal(err)
	}
	if picked.FrameIndex != 1 || len(picked.Locals) == 0 || picked.Locals[0].Name != "n" {
		t.Errorf("frame_index 1: %d with locals %+v, want outer's n", picked.FrameIndex, picked.Locals)
	}
	for _, bad := range []int{-1, len(snap.Frames), 500} {
		_, err := s.Snapshot(ctxFor(t, 20*time.Second), dap.SnapshotRequest{SessionID: snap.SessionID, FrameIndex: &bad})
		if code(err) != protocol.CodeInvalidPayload || !strings.Contains(err.Error(), "frame_index") {
			t.Errorf("frame_index %d: %v, want invalid_payload naming frame_index", bad, err)
		}
	}
}
