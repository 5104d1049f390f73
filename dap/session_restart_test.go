//go:build !windows

package dap_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// writeFiles writes files (name → content) into a new temp root.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const pyAdd = `def add(a, b):
    total = a + b
    return total

print(add(2, 3))
print("done")
`

const goAdd = `package main

import "fmt"

func add(a, b int) int {
	total := a + b
	return total
}

func main() {
	fmt.Println(add(2, 3))
	fmt.Println("done")
}
`

// checkRestart starts a session with a breakpoint at path:line, waits for
// it, sets a second breakpoint (at line2), restarts, and checks that the
// session id is kept and the program stops at the first breakpoint again,
// then at the second: the breakpoints set after the start survive too.
func checkRestart(t *testing.T, m *dap.Manager, req dap.StartRequest, path string, line, line2 int, method string) {
	t.Helper()
	ctx := ctxFor(t, 120*time.Second)
	req.Breakpoints = []dap.FileBreakpoints{{Path: path, Breakpoints: []dap.SourceBreakpoint{{Line: line}}}}
	start, err := m.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{WaitTimeoutMS: 30000})
	if err != nil || snap.State != dap.StateStopped || snap.Frames[0].Line != line {
		t.Fatalf("first stop: %+v, %v; want line %d", snap, err, line)
	}
	if _, err := s.SetBreakpoints(ctx, dap.SetBreakpointsRequest{Path: path, Breakpoints: []dap.SourceBreakpoint{{Line: line}, {Line: line2}}}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	res, err := m.Restart(ctx, dap.RestartRequest{SessionID: start.SessionID, WaitTimeoutMS: 30000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s restart (%s) stopped again after %v", s.Adapter(), res.Method, time.Since(began).Round(time.Millisecond))
	if res.SessionID != start.SessionID || res.Method != method {
		t.Fatalf("restart = %+v, want session %s by %s", res, start.SessionID, method)
	}
	if res.State != dap.StateStopped || res.Stop == nil || res.Location == nil || res.Location.Line != line {
		t.Fatalf("restart answered %+v (location %+v), want stopped at line %d", res, res.Location, line)
	}
	s, err = m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	next, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{Wait: new(true), WaitTimeoutMS: 30000})
	if err != nil || next.Location == nil || next.Location.Line != line2 {
		t.Fatalf("continue after restart: %+v, %v; want the breakpoint at line %d", next, err, line2)
	}
	if got := m.List().Sessions; len(got) != 1 || got[0].SessionID != start.SessionID {
		t.Fatalf("list after restart = %+v, want the one session", got)
	}
	if _, err := m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID}); err != nil {
		t.Fatal(err)
	}
}

func TestRestartKeepsBreakpointsAndIDForC(t *testing.T) {
	root := cWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	// add_numbers.c: line 4 is return sum; line 9 the second call in main.
	checkRestart(t, m, dap.StartRequest{Language: "c", Program: "add_numbers"}, "add_numbers.c", 4, 9, "restart")
}

func TestRestartKeepsBreakpointsAndIDForPython(t *testing.T) {
	root := writeFiles(t, map[string]string{"add.py": pyAdd})
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	checkRestart(t, m, dap.StartRequest{Language: "python", Program: "add.py"}, "add.py", 3, 6, "relaunch")
}

func TestRestartKeepsBreakpointsAndIDForGo(t *testing.T) {
	root := writeFiles(t, map[string]string{"main.go": goAdd, "go.mod": "module addgo\n\ngo 1.21\n"})
	m := newManager(t, root)
	needAdapter(t, m, "delve")
	checkRestart(t, m, dap.StartRequest{Language: "go", Program: "."}, "main.go", 7, 12, "relaunch")
}

// TestRestartOfAStopOnEntryCSessionStopsAtEntryAgain: lldb-dap's restart
// reports the new run's entry stop as exception "signal SIGSTOP", as it
// does a launch's; the restart answers it as the entry stop it is.
func TestRestartOfAStopOnEntryCSessionStopsAtEntryAgain(t *testing.T) {
	root := cWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	ctx := ctxFor(t, 60*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "add_numbers", StopOnEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.Session(start.SessionID)
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stop == nil || snap.Stop.Reason != "entry" {
		t.Fatalf("launch stopped with %+v, want entry", snap.Stop)
	}
	res, err := m.Restart(ctx, dap.RestartRequest{SessionID: start.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != "restart" || res.Stop == nil || res.Stop.Reason != "entry" {
		t.Fatalf("restart = %+v, stop %+v; want lldb-dap's restart stopped at entry", res, res.Stop)
	}
}

func TestRestartRefusesUnknownSessions(t *testing.T) {
	root := cWorkspace(t)
	m := newManager(t, root)
	ctx := ctxFor(t, 10*time.Second)
	if _, err := m.Restart(ctx, dap.RestartRequest{SessionID: "dbg-nope"}); code(err) != protocol.CodeSessionNotFound {
		t.Fatalf("restart of an unknown session: %v, want session_not_found", err)
	}
	if _, err := m.Restart(ctx, dap.RestartRequest{}); code(err) != protocol.CodeInvalidPayload {
		t.Fatalf("restart without session_id: %v, want invalid_payload", err)
	}
}

// TestRestartOfAnEndedSessionRunsItAgain: a program that ran to its end
// is relaunched under the same id and stops at its breakpoint again.
func TestRestartOfAnEndedSessionRunsItAgain(t *testing.T) {
	root := cWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	ctx := ctxFor(t, 60*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "add_numbers",
		Breakpoints: []dap.FileBreakpoints{{Path: "add_numbers.c", Breakpoints: []dap.SourceBreakpoint{{Line: 4}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.Session(start.SessionID)
	wait := dap.ControlRequest{Wait: new(true), WaitTimeoutMS: 10000}
	if _, err := s.Snapshot(ctx, dap.SnapshotRequest{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Control(ctx, dap.CmdContinue, wait); err != nil {
			t.Fatal(err)
		}
	}
	if info := m.List().Sessions[0]; info.State != dap.StateEnded {
		t.Fatalf("after two continues: %+v, want ended", info)
	}
	res, err := m.Restart(ctx, dap.RestartRequest{SessionID: start.SessionID})
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != "relaunch" || res.SessionID != start.SessionID || res.Location == nil || res.Location.Line != 4 {
		t.Fatalf("restart of the ended session = %+v at %+v, want a relaunch stopped at line 4", res, res.Location)
	}
	if _, err := s.Snapshot(ctx, dap.SnapshotRequest{}); code(err) != protocol.CodeSessionEnded {
		t.Fatalf("the old generation answered %v, want session_ended", err)
	}
}

// TestConcurrentRestartsTakeTurns: two restarts of one session at once
// both answer, one after the other, and leave one session and one
// adapter (TestMain checks that no process is left).
func TestConcurrentRestartsTakeTurns(t *testing.T) {
	root := writeFiles(t, map[string]string{"add.py": pyAdd})
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	ctx := ctxFor(t, 60*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "python", Program: "add.py",
		Breakpoints: []dap.FileBreakpoints{{Path: "add.py", Breakpoints: []dap.SourceBreakpoint{{Line: 3}}}}})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			res, err := m.Restart(ctx, dap.RestartRequest{SessionID: start.SessionID, WaitTimeoutMS: 20000})
			if err == nil && (res.Location == nil || res.Location.Line != 3) {
				err = fmt.Errorf("restart = %+v, want a stop at line 3", res)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := m.List().Sessions; len(got) != 1 || got[0].State != dap.StateStopped {
		t.Fatalf("list = %+v, want the one session, stopped", got)
	}
}
