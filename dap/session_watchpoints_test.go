//go:build !windows

package dap_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/debugtest"
	"github.com/tetherdev/tether/protocol"
)

// startBump starts crash bump stopped at main's first bump(1) call.
func startBump(t *testing.T, m *dap.Manager) *dap.Session {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "crash", Args: []string{"bump"},
		Breakpoints: []dap.FileBreakpoints{{Path: "crash.c", Breakpoints: []dap.SourceBreakpoint{{LineContent: "bump(1);"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := s.Snapshot(ctx, dap.SnapshotRequest{}); err != nil || snap.Frames[0].Line != 34 {
		t.Fatalf("first stop: %+v, %v; want main at line 34", snap, err)
	}
	return s
}

// needHardwareWatchpoints skips a test that a watchpoint stops the
// program on a machine that never delivers the trap (debugtest).
func needHardwareWatchpoints(t *testing.T) {
	t.Helper()
	if ok, why := debugtest.HardwareWatchpoints(); !ok {
		t.Skip(why)
	}
}

// continueToWrite continues and checks the program stops in bump with
// counter at want, within the wait.
func continueToWrite(t *testing.T, s *dap.Session, want string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	res, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{Wait: new(true), WaitTimeoutMS: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != dap.StateStopped || res.Stop.Reason != "data breakpoint" || res.Location == nil || !strings.HasPrefix(res.Location.Name, "bump") {
		t.Fatalf("continue = %+v at %+v, want a stop in bump", res, res.Location)
	}
	t.Logf("stopped by the watchpoint: %+v at %s:%d", *res.Stop, res.Location.Name, res.Location.Line)
	ev, err := s.Evaluate(ctx, dap.EvaluateRequest{Expression: "counter"})
	if err != nil || ev.Result != want {
		t.Fatalf("counter = %+v, %v; want %s", ev, err, want)
	}
}

func TestCWatchpointStopsWhenTheVariableIsWritten(t *testing.T) {
	root := crashWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	needHardwareWatchpoints(t)
	s := startBump(t, m)
	ctx := ctxFor(t, 30*time.Second)
	set, err := s.SetWatchpoints(ctx, dap.WatchpointsRequest{Watchpoints: []dap.Watchpoint{{Expression: "counter"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Watchpoints) != 1 || !set.Watchpoints[0].Verified || set.Watchpoints[0].Access != "write" {
		t.Fatalf("set = %+v, want one verified write watchpoint", set.Watchpoints)
	}
	continueToWrite(t, s, "1")
	continueToWrite(t, s, "3")
	// Cleared, the program runs to its end.
	if _, err := s.SetWatchpoints(ctx, dap.WatchpointsRequest{Watchpoints: []dap.Watchpoint{}}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{Wait: new(true), WaitTimeoutMS: 10000}); err != nil || res.State != dap.StateEnded {
		t.Fatalf("continue without watchpoints: %+v, %v; want the end", res, err)
	}
}

func TestCWatchpointByAddress(t *testing.T) {
	root := crashWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	needHardwareWatchpoints(t)
	s := startBump(t, m)
	ctx := ctxFor(t, 30*time.Second)
	addr, err := s.Evaluate(ctx, dap.EvaluateRequest{Expression: "(unsigned long)&counter"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(addr.Result, 0, 64)
	if err != nil {
		t.Fatalf("&counter = %q: %v", addr.Result, err)
	}
	hex := fmt.Sprintf("%#x", n)
	if _, err := s.SetWatchpoints(ctx, dap.WatchpointsRequest{Watchpoints: []dap.Watchpoint{{Address: hex, Size: 4}}}); err != nil {
		t.Fatalf("watch %s (&counter = %s): %v", hex, addr.Result, err)
	}
	continueToWrite(t, s, "1")
}

func TestWatchpointBadInputAnswersAtOnceNamingTheField(t *testing.T) {
	root := crashWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	s := startBump(t, m)
	ctx := ctxFor(t, 30*time.Second)
	for _, tc := range []struct {
		wp   dap.Watchpoint
		says string
	}{
		{dap.Watchpoint{Expression: "counter + 1"}, "watchpoints[0].expression"},
		{dap.Watchpoint{Expression: "no_such_variable"}, "watchpoints[0].expression"},
		{dap.Watchpoint{}, "watchpoints[0]: give exactly one"},
		{dap.Watchpoint{Address: "here"}, "watchpoints[0].address"},
		{dap.Watchpoint{Expression: "counter", Access: "exec"}, "watchpoints[0].access"},
	} {
		began := time.Now()
		_, err := s.SetWatchpoints(ctx, dap.WatchpointsRequest{Watchpoints: []dap.Watchpoint{tc.wp}})
		if code(err) != protocol.CodeInvalidPayload || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want invalid_payload naming %s", tc.wp, err, tc.says)
		}
		if d := time.Since(began); d > 2*time.Second {
			t.Errorf("%+v answered after %v", tc.wp, d)
		}
	}
}

func TestWatchpointsUnsupportedByTheAdapterNameThoseThatDo(t *testing.T) {
	root := writeFiles(t, map[string]string{"add.py": pyAdd})
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	ctx := ctxFor(t, 30*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "python", Program: "add.py", StopOnEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.Session(start.SessionID)
	_, err = s.SetWatchpoints(ctx, dap.WatchpointsRequest{Watchpoints: []dap.Watchpoint{{Expression: "a"}}})
	if code(err) != protocol.CodeUnsupported || !strings.Contains(err.Error(), "lldb-dap") || !strings.Contains(err.Error(), "debugpy") {
		t.Fatalf("watchpoint on debugpy: %v, want unsupported naming debugpy and lldb-dap", err)
	}
}
