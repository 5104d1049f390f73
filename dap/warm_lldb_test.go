//go:build !windows

package dap_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/tuning"
)

// cStart is what a C start to the breakpoint showed the agent.
type cStart struct {
	start  *dap.StartResult
	snap   *dap.Snapshot
	output string
}

// startCToBreakpoint starts add_numbers with a breakpoint at line 4, takes
// the snapshot and the output so far, runs during, and stops the session.
func startCToBreakpoint(t *testing.T, m *dap.Manager, during func()) cStart {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "add_numbers",
		Breakpoints: []dap.FileBreakpoints{{Path: "add_numbers.c", Breakpoints: []dap.SourceBreakpoint{{Line: 4}}}}})
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
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 || snap.Frames[0].Line != 4 || len(snap.Locals) == 0 {
		t.Fatalf("snapshot = stop %+v frames %+v locals %+v, want the breakpoint at line 4 with locals", snap.Stop, snap.Frames, snap.Locals)
	}
	out := s.Output(0).Output
	if during != nil {
		during()
	}
	if _, err := m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID}); err != nil {
		t.Fatal(err)
	}
	return cStart{start: start, snap: snap, output: out}
}

var digits = regexp.MustCompile(`[0-9]+`)

// sameAsCold fails unless the warm start showed what the cold one did:
// breakpoints, stop, frames (ids aside), locals, and output (numbers,
// such as the pid, aside).
func sameAsCold(t *testing.T, cold, warm cStart) {
	t.Helper()
	if !reflect.DeepEqual(warm.start.Breakpoints, cold.start.Breakpoints) {
		t.Errorf("breakpoints: warm %+v, cold %+v", warm.start.Breakpoints, cold.start.Breakpoints)
	}
	ws, cs := *warm.snap.Stop, *cold.snap.Stop
	ws.ThreadID, cs.ThreadID = 0, 0
	if !reflect.DeepEqual(ws, cs) {
		t.Errorf("stop: warm %+v, cold %+v", ws, cs)
	}
	frames := func(s *dap.Snapshot) []dap.Frame {
		out := []dap.Frame{}
		for _, f := range s.Frames {
			f.ID = 0
			out = append(out, f)
		}
		return out
	}
	if w, c := frames(warm.snap), frames(cold.snap); !reflect.DeepEqual(w, c) {
		t.Errorf("frames: warm %+v, cold %+v", w, c)
	}
	if !reflect.DeepEqual(warm.snap.Locals, cold.snap.Locals) {
		t.Errorf("locals: warm %+v, cold %+v", warm.snap.Locals, cold.snap.Locals)
	}
	if w, c := digits.ReplaceAllString(warm.output, "N"), digits.ReplaceAllString(cold.output, "N"); w != c {
		t.Errorf("output: warm %q, cold %q", warm.output, cold.output)
	}
}

// A warm lldb-dap preloads the last program and its libraries (the
// loader's list: libc at least) and is left with no target and no
// breakpoint; the start that takes it shows what a cold start showed, and
// nothing of the preload is in its output.
func TestWarmLLDBPreloadStartShowsWhatAColdStartShows(t *testing.T) {
	root := cWorkspace(t)
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "lldb-dap")
	cold := startCToBreakpoint(t, m, nil)
	w := awaitWarm(t, m, "lldb-dap")
	ctx := ctxFor(t, 30*time.Second)
	global, err := m.WarmCommand(ctx, "lldb-dap", "image list --global")
	if err != nil {
		t.Fatal(err)
	}
	if tuning.On(tuning.LLDBPreload) && (!strings.Contains(global, filepath.Join(root, "add_numbers")) || !strings.Contains(global, "libc.so")) {
		t.Errorf("lldb's shared modules in the warm lldb-dap = %q, want add_numbers and libc", global)
	}
	for cmd, want := range map[string]string{"target list": "No targets.", "breakpoint list": "No breakpoints currently set."} {
		if got, err := m.WarmCommand(ctx, "lldb-dap", cmd); err != nil || !strings.Contains(got, want) {
			t.Errorf("%s in the warm lldb-dap = %q, %v; want %q", cmd, got, err, want)
		}
	}
	warm := startCToBreakpoint(t, m, func() {
		if !alive(w.Pid) {
			t.Errorf("the warm lldb-dap (pid %d) is not the session's", w.Pid)
		}
	})
	sameAsCold(t, cold, warm)
	for _, s := range []string{"target create", "Current executable", "tether-warm-preload", "image lookup", "targets deleted"} {
		if strings.Contains(warm.output, s) {
			t.Errorf("warm start's output %q shows the preload (%q)", warm.output, s)
		}
	}
}

// A preload that fails (the last program is no longer an executable when
// the warm lldb-dap is made) leaves a warm adapter that starts as a cold
// one: no target, no breakpoint left in lldb's dummy target for the
// session to inherit.
func TestWarmLLDBWithFailedPreloadStillStarts(t *testing.T) {
	root := cWorkspace(t)
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "lldb-dap")
	prog := filepath.Join(root, "add_numbers")
	kept := filepath.Join(root, "add_numbers.kept")
	cold := startCToBreakpoint(t, m, func() {
		// Before the session ends, so before the warm one is made.
		if err := os.Rename(prog, kept); err != nil {
			t.Fatal(err)
		}
		write(t, prog, "not an executable\n")
	})
	awaitWarm(t, m, "lldb-dap")
	ctx := ctxFor(t, 30*time.Second)
	for cmd, want := range map[string]string{"target list": "No targets.", "breakpoint list": "No breakpoints currently set."} {
		if got, err := m.WarmCommand(ctx, "lldb-dap", cmd); err != nil || !strings.Contains(got, want) {
			t.Errorf("%s in the warm lldb-dap = %q, %v; want %q", cmd, got, err, want)
		}
	}
	w, _ := warmOf(m, "lldb-dap")
	if err := os.Rename(kept, prog); err != nil {
		t.Fatal(err)
	}
	warm := startCToBreakpoint(t, m, func() {
		if !alive(w.Pid) {
			t.Errorf("the warm lldb-dap (pid %d) is not the session's", w.Pid)
		}
	})
	sameAsCold(t, cold, warm)
}
