//go:build !windows

// These tests serve a workspace with a bridge in process, which does not
// build on Windows (docs/platforms.md).

package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/gittest"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/terminal"
)

func TestTerminalRunReturnsExitCodeAndOutput(t *testing.T) {
	br := newInprocBridge(t, nil)
	cs := client(t, br, nil)
	var res terminal.ExecResult
	txt := ok(t, cs, "terminal_run", map[string]any{"command": "echo hello; echo oops >&2; exit 3"}, &res)
	if res.ExitCode != 3 || !strings.Contains(res.Output, "hello") {
		t.Fatalf("result %+v", res)
	}
	if !strings.Contains(txt, "Exit code 3") || !strings.Contains(txt, "hello") || !strings.Contains(txt, "oops") {
		t.Errorf("text %q", txt)
	}
}

func TestTerminalRunStopsAtTimeoutWithTheOutputSoFar(t *testing.T) {
	cs := client(t, newInprocBridge(t, nil), nil)
	var res terminal.ExecResult
	txt := ok(t, cs, "terminal_run", map[string]any{"command": "echo started; sleep 30", "timeout_s": 1}, &res)
	if !res.TimedOut || !strings.Contains(res.Output, "started") || !strings.Contains(txt, "Timed out") || !strings.Contains(txt, "async") {
		t.Fatalf("result %+v, text %q", res, txt)
	}
}

func TestTerminalAsyncSessionInputOutputSignal(t *testing.T) {
	br := newInprocBridge(t, nil)
	cs := client(t, br, nil)
	var started terminal.ExecResult
	txt := ok(t, cs, "terminal_run", map[string]any{"command": "cat", "async": true}, &started)
	if started.SessionID == "" || !strings.Contains(txt, started.SessionID) || !strings.Contains(txt, "terminal_output") {
		t.Fatalf("async start %+v, text %q", started, txt)
	}
	id := started.SessionID
	ok(t, cs, "terminal_input", map[string]any{"session_id": id, "data": "one\n"}, nil)
	var out terminal.OutputResult
	var seen strings.Builder
	testwait.Until(t, 10*time.Second, func() bool {
		txt = ok(t, cs, "terminal_output", map[string]any{"session_id": id, "offset": out.NextOffset}, &out)
		seen.WriteString(out.Output)
		return strings.Contains(seen.String(), "one")
	}, "the echo")
	if !out.Running || !strings.Contains(txt, "is running") {
		t.Fatalf("session ended: %q", txt)
	}
	var sig protocol.SignalResult
	ok(t, cs, "terminal_signal", map[string]any{"session_id": id, "signal": "SIGINT"}, &sig)
	if sig.Signal != "SIGINT" {
		t.Errorf("signal %+v", sig)
	}
	testwait.Until(t, 10*time.Second, func() bool {
		txt = ok(t, cs, "terminal_output", map[string]any{"session_id": id, "offset": out.NextOffset}, &out)
		return !out.Running
	}, "the session to end")
	if !strings.Contains(txt, "exited with code 130") {
		t.Errorf("final text %q", txt)
	}
	fails(t, cs, "terminal_output", map[string]any{"session_id": "no-such"}, protocol.CodeSessionNotFound)
}

// An async command in a sandbox is the terminal's model: the same tools,
// given the sandbox_id, on the sandbox's session routes.
func TestSandboxAsyncSessionInputOutputSignal(t *testing.T) {
	br := newInprocBridgeWith(t, nil, bridge.Config{SandboxDir: t.TempDir()})
	cs := client(t, br, nil)
	src := gittest.Repo(t, map[string]string{"README.md": "# demo\n"})
	var acq sandbox.AcquireResult
	ok(t, cs, "sandbox_acquire", map[string]any{"repo": src, "mode": "edit", "key": "async"}, &acq)
	sb := acq.WorkspaceID
	var started terminal.ExecResult
	txt := ok(t, cs, "terminal_run", map[string]any{"command": "cat", "async": true, "sandbox_id": sb}, &started)
	if started.SessionID == "" || !strings.Contains(txt, "sandbox_id "+sb) {
		t.Fatalf("async start %+v, text %q", started, txt)
	}
	id := started.SessionID
	ok(t, cs, "terminal_input", map[string]any{"session_id": id, "sandbox_id": sb, "data": "one\n"}, nil)
	var out terminal.OutputResult
	testwait.Until(t, 10*time.Second, func() bool {
		txt = ok(t, cs, "terminal_output", map[string]any{"session_id": id, "sandbox_id": sb}, &out)
		return strings.Contains(out.Output, "one")
	}, "the echo")
	if !out.Running || !strings.Contains(txt, "is running") {
		t.Fatalf("session ended: %q", txt)
	}
	if want := "/api/sandbox/workspaces/" + sb + "/sessions/" + id + "/output"; !slices.Contains(br.endpoints(), want) {
		t.Fatalf("calls %q, want %s", br.endpoints(), want)
	}
	ok(t, cs, "terminal_signal", map[string]any{"session_id": id, "sandbox_id": sb, "signal": "TERM"}, nil)
	testwait.Until(t, 10*time.Second, func() bool {
		txt = ok(t, cs, "terminal_output", map[string]any{"session_id": id, "sandbox_id": sb, "offset": out.NextOffset}, &out)
		return !out.Running
	}, "the session to end")
	if !strings.Contains(txt, "exited with code 143") {
		t.Errorf("final text %q", txt)
	}
	// The terminal's sessions are not the sandbox's.
	fails(t, cs, "terminal_output", map[string]any{"session_id": id}, protocol.CodeSessionNotFound)
	// A session ended by its runtime says so.
	ok(t, cs, "terminal_run", map[string]any{"command": "sleep 60", "async": true, "sandbox_id": sb}, &started)
	ok(t, cs, "sandbox_release", map[string]any{"sandbox_id": sb}, nil)
	txt = ok(t, cs, "terminal_output", map[string]any{"session_id": started.SessionID, "sandbox_id": sb}, &out)
	if out.EndedBy != protocol.CodeRuntimeStopped || !strings.Contains(txt, "was ended (runtime_stopped)") {
		t.Errorf("after release: %+v, text %q", out, txt)
	}
}

func TestFileToolsRouteToTheRootOrTheSandbox(t *testing.T) {
	ws := &fakeWorkspace{answer: func(_ context.Context, req caller.Request) protocol.ToolResponse {
		return success(map[string]any{"path": "a.txt", "content": "one\ntwo\n", "size": 8, "total_lines": 2})
	}}
	cs := client(t, ws, nil)
	txt := ok(t, cs, "file_read", map[string]any{"path": "a.txt"}, nil)
	ok(t, cs, "file_read", map[string]any{"path": "a.txt", "sandbox_id": "ws-abc/../x"}, nil)
	calls := ws.called()
	if calls[0].Endpoint != protocol.WorkspaceReadFileEndpoint || calls[1].Endpoint != "/api/sandbox/workspaces/ws-abc%2F..%2Fx/read-file" {
		t.Fatalf("endpoints %q, %q", calls[0].Endpoint, calls[1].Endpoint)
	}
	var payload map[string]any
	_ = json.Unmarshal(calls[0].Payload, &payload)
	if len(payload) != 1 || payload["path"] != "a.txt" {
		t.Errorf("payload %v: want only the arguments given", payload)
	}
	if !strings.Contains(txt, "     1\tone\n     2\ttwo") {
		t.Errorf("text %q: want numbered lines", txt)
	}
}

// debugScript plays a debug adapter's routes for the flow tests: a session
// that runs until the first snapshot asks, then stops at add_numbers.c:4.
type debugScript struct {
	mu      sync.Mutex
	running bool
	calls   []string
	// startStop, when set, is the reason of the stop the session is in
	// when the start answers (entry, or a breakpoint reached meanwhile).
	startStop string
}

func (d *debugScript) answer(_ context.Context, req caller.Request) protocol.ToolResponse {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, req.Endpoint)
	switch req.Endpoint {
	case protocol.WorkspaceCapabilitiesEndpoint:
		return success(protocol.CapabilitiesResult{Root: "/w"})
	case protocol.DebugStartEndpoint:
		if d.startStop != "" {
			return success(dap.StartResult{SessionID: "dbg-1", Adapter: "lldb-dap", State: dap.StateStopped, Stop: &dap.StopInfo{Reason: d.startStop, ThreadID: 1}})
		}
		return success(dap.StartResult{SessionID: "dbg-1", Adapter: "lldb-dap", State: dap.StateRunning})
	case protocol.DebugContinueEndpoint:
		if d.running {
			// The bridge answers at once for a session that already runs.
			return success(dap.ControlResult{SessionID: "dbg-1", State: dap.StateRunning})
		}
		return success(dap.ControlResult{SessionID: "dbg-1", State: dap.StateStopped, Stop: &dap.StopInfo{Reason: "breakpoint", ThreadID: 1}})
	case protocol.DebugSnapshotEndpoint:
		d.running = false
		return success(dap.Snapshot{SessionID: "dbg-1", State: dap.StateStopped, ThreadID: 1,
			Stop:   &dap.StopInfo{Reason: "breakpoint", ThreadID: 1},
			Frames: []dap.Frame{{ID: 1, Name: "add_numbers", Path: "/w/add_numbers.c", Line: 4}, {ID: 2, Name: "main", Path: "/w/add_numbers.c", Line: 8}},
			Locals: []dap.Variable{{Name: "a", Value: "2", Type: "int"}, {Name: "b", Value: "3", Type: "int"}, {Name: "sum", Value: "5", Type: "int"}, {Name: "evil", Value: "\x1b[2J\nfake"}},
		})
	case protocol.WorkspaceReadFileEndpoint:
		return success(map[string]any{"path": "add_numbers.c", "start_line": 1, "end_line": 5, "content": "#include <stdio.h>\nint add_numbers(int a, int b) {\n    int sum = a + b;\n    return sum;\n}\n"})
	}
	return protocol.Failure("c", protocol.CodeUnknownRoute, "no route "+req.Endpoint)
}

func TestContinueWaitsForARunningSessionAndShowsTheStop(t *testing.T) {
	d := &debugScript{running: true}
	cs := client(t, &fakeWorkspace{answer: d.answer}, nil)
	d.calls = nil // the capabilities tools/list asked for: the root is known
	txt := ok(t, cs, "debug_continue", map[string]any{"session_id": "dbg-1"}, nil)
	for _, want := range []string{"Stopped (breakpoint) in add_numbers at add_numbers.c:4", "#1 main at add_numbers.c:8", "a = 2 (int)", "b = 3 (int)", "sum = 5 (int)",
		"→     4      return sum;", "      5  }", `evil = \x1b[2J\nfake`, "Next: debug_step"} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	if got := strings.Join(d.calls, " "); got != protocol.DebugContinueEndpoint+" "+protocol.DebugSnapshotEndpoint+" "+protocol.WorkspaceReadFileEndpoint {
		t.Errorf("calls %s", got)
	}
}

func TestContinueRightAfterStartShowsTheFirstStopEvenIfAlreadyReached(t *testing.T) {
	d := &debugScript{running: false} // it reached the breakpoint before continue came
	cs := client(t, &fakeWorkspace{answer: d.answer}, nil)
	d.calls = nil
	ok(t, cs, "debug_start", map[string]any{"language": "c", "program": "add_numbers", "breakpoints": []any{map[string]any{"path": "add_numbers.c", "line": 4}}}, nil)
	txt := ok(t, cs, "debug_continue", map[string]any{"session_id": "dbg-1"}, nil)
	if !strings.Contains(txt, "sum = 5") {
		t.Errorf("text:\n%s", txt)
	}
	if got := strings.Join(d.calls, " "); got != protocol.DebugStartEndpoint+" "+protocol.DebugSnapshotEndpoint+" "+protocol.WorkspaceReadFileEndpoint {
		t.Errorf("calls %s: want no continue before the first stop was shown", got)
	}
	// The next continue resumes.
	d.calls = nil
	ok(t, cs, "debug_continue", map[string]any{"session_id": "dbg-1"}, nil)
	if len(d.calls) == 0 || d.calls[0] != protocol.DebugContinueEndpoint {
		t.Errorf("second continue made %v", d.calls)
	}
}

// TestContinueAfterAStartThatStoppedAtABreakpointShowsThatStop: a program
// quick enough to reach its breakpoint before the start answers is stopped
// there when debug_continue comes; that stop, which the agent has not seen,
// is the one shown (no continue past it). A stop at the entry the agent
// asked for is resumed from.
func TestContinueAfterAStartThatStoppedAtABreakpointShowsThatStop(t *testing.T) {
	for reason, wantContinue := range map[string]bool{"breakpoint": false, "exception": false, "entry": true} {
		d := &debugScript{startStop: reason}
		cs := client(t, &fakeWorkspace{answer: d.answer}, nil)
		d.calls = nil
		ok(t, cs, "debug_start", map[string]any{"language": "c", "program": "add_numbers", "stop_on_entry": reason == "entry",
			"breakpoints": []any{map[string]any{"path": "add_numbers.c", "line": 4}}}, nil)
		txt := ok(t, cs, "debug_continue", map[string]any{"session_id": "dbg-1"}, nil)
		if !strings.Contains(txt, "sum = 5") {
			t.Errorf("%s: text:\n%s", reason, txt)
		}
		continued := slices.Contains(d.calls, protocol.DebugContinueEndpoint)
		if continued != wantContinue {
			t.Errorf("stopped at %s when the start answered: calls %v, want a continue: %v", reason, d.calls, wantContinue)
		}
	}
}
