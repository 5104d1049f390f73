//go:build !windows

package dap_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/testwait"
)

// The built-in Node adapter's warm nodes (dap/node/warm.go, warm_node.go).

// jsMain is a CommonJS program: line 4 is in add, line 7 at the top level,
// where main says whether node runs it as the main module.
const jsMain = `const main = require.main === module;
const argv = process.argv.slice(2).join(",");
function add(a, b) {
  const sum = a + b;
  return sum;
}
console.log("sum", add(2, 3), main, argv);
`

// esMain is an ES module: line 3 is in add.
const esMain = `import { basename } from "node:path";
function add(a, b) {
  const sum = a + b;
  return sum;
}
console.log("sum", add(2, 3), basename(import.meta.url));
`

func TestWarmStartStopsAtBreakpointForNodeCommonJS(t *testing.T) {
	root := writeFiles(t, map[string]string{"main.js": jsMain})
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "node")
	req := dap.StartRequest{Language: "javascript", Program: "main.js", Args: []string{"a", "b"}}
	checkWarmStart(t, m, "node", req, "main.js", 4)

	// A third start, warm too: the program is the main module, with its
	// argv, and its stack is the cold one's without node's bootstrap frame.
	// The loader leaves no global and no module behind.
	exprs := []string{"main", "argv", "Object.keys(globalThis).filter(k => k.startsWith('__tether')).length", "Object.keys(require.cache).length"}
	warm := breakpointFrames(t, m, req, "main.js", 7, exprs...)
	cold := breakpointFrames(t, newManager(t, root), req, "main.js", 7, exprs...)
	if !warm.verified || !cold.verified {
		t.Errorf("breakpoint verified at start: warm %v, cold %v; want both", warm.verified, cold.verified)
	}
	if warm.exprs != "true|a,b|0|1" || cold.exprs != warm.exprs {
		t.Errorf("%q: warm %q, cold %q; want true|a,b|0|1", exprs, warm.exprs, cold.exprs)
	}
	if n := len(cold.frames); n == 0 || cold.frames[n-1] != "(anonymous) node:internal/main/run_main_module" {
		t.Fatalf("cold frames %q, want node's bootstrap frame last", cold.frames)
	}
	if got, want := strings.Join(warm.frames, "\n"), strings.Join(cold.frames[:len(cold.frames)-1], "\n"); got != want {
		t.Errorf("warm frames:\n%s\nwant the cold ones without the bootstrap frame:\n%s", got, want)
	}
}

// An ES module, by its .mjs name or by "type": "module", runs as the entry
// point; its stack is the cold one.
func TestWarmStartStopsAtBreakpointForNodeESModule(t *testing.T) {
	for program, files := range map[string]map[string]string{
		"main.mjs": {"main.mjs": esMain},
		"main.js":  {"main.js": esMain, "package.json": `{"type": "module"}`},
	} {
		t.Run(program, func(t *testing.T) {
			root := writeFiles(t, files)
			m := newWarmManager(t, root, 0)
			needAdapter(t, m, "node")
			req := dap.StartRequest{Language: "javascript", Program: program}
			checkWarmStart(t, m, "node", req, program, 3)
			warm := breakpointFrames(t, m, req, program, 3)
			cold := breakpointFrames(t, newManager(t, root), req, program, 3)
			if !warm.verified || !cold.verified {
				t.Errorf("breakpoint verified at start: warm %v, cold %v; want both", warm.verified, cold.verified)
			}
			if got, want := strings.Join(warm.frames, "\n"), strings.Join(cold.frames, "\n"); got != want {
				t.Errorf("warm frames:\n%s\nwant the cold ones:\n%s", got, want)
			}
		})
	}
}

type stopSeen struct {
	verified bool // the start's breakpoint was verified at once
	reason   string
	frames   []string // name and source (path or node: URL)
	top      int      // the first frame's line
	exprs    string   // the expressions' results, |-joined
}

// breakpointFrames starts req with a breakpoint at path:line (none for
// line 0), takes the snapshot of its first stop with exprs and stops it.
func breakpointFrames(t *testing.T, m *dap.Manager, req dap.StartRequest, path string, line int, exprs ...string) stopSeen {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	if line > 0 {
		req.Breakpoints = []dap.FileBreakpoints{{Path: path, Breakpoints: []dap.SourceBreakpoint{{Line: line}}}}
	}
	start, err := m.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{Expressions: exprs})
	if err != nil {
		t.Fatal(err)
	}
	var seen stopSeen
	seen.verified = len(start.Breakpoints) == 1 && start.Breakpoints[0].Verified
	if snap.Stop != nil {
		seen.reason = snap.Stop.Reason
	}
	for _, f := range snap.Frames {
		src := f.Path
		if src == "" {
			src = f.Source
		}
		seen.frames = append(seen.frames, f.Name+" "+src)
	}
	if len(snap.Frames) > 0 {
		seen.top = snap.Frames[0].Line
	}
	var results []string
	for _, e := range snap.Expressions {
		results = append(results, strings.Trim(e.Result, `"'`))
	}
	seen.exprs = strings.Join(results, "|")
	if _, err := m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID}); err != nil {
		t.Fatal(err)
	}
	return seen
}

// stopOnEntry on a warm node stops where a cold launch does, with the same
// reason and stack (a CommonJS one without node's bootstrap frame): node's
// own entry pause at the first line, of a CommonJS program and of an ES
// module, before its imports run.
func TestWarmNodeStopOnEntryEqualsCold(t *testing.T) {
	root := writeFiles(t, map[string]string{"main.js": jsMain, "main.mjs": esMain})
	for _, program := range []string{"main.js", "main.mjs"} {
		t.Run(program, func(t *testing.T) {
			m := newWarmManager(t, root, 0)
			needAdapter(t, m, "node")
			req := dap.StartRequest{Language: "javascript", Program: program, StopOnEntry: true}
			cold := breakpointFrames(t, m, req, program, 0)
			first := awaitWarm(t, m, "node")
			warm := breakpointFrames(t, m, req, program, 0)
			if alive(first.Pid) {
				t.Fatalf("the warm node (pid %d) was not the one taken", first.Pid)
			}
			if cold.reason != "entry" || cold.top != 1 || len(cold.frames) == 0 {
				t.Fatalf("cold stop %+v, want entry at line 1", cold)
			}
			want := cold.frames
			if program == "main.js" {
				want = want[:len(want)-1] // node's bootstrap frame
			}
			if warm.reason != cold.reason || warm.top != cold.top || strings.Join(warm.frames, "\n") != strings.Join(want, "\n") {
				t.Errorf("warm stop %+v, want cold's %+v", warm, cold)
			}
		})
	}
}

// The program's stdout and stderr reach the session's output and its exit
// code the session's end, as in a cold launch.
func TestWarmNodeOutputAndExitCodeReachTheSession(t *testing.T) {
	root := writeFiles(t, map[string]string{"exit.js": `console.log("to stdout");
console.error("to stderr");
process.exitCode = 3;
`})
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "node")
	run := func() (string, *int) {
		ctx := ctxFor(t, 60*time.Second)
		start, err := m.Start(ctx, dap.StartRequest{Language: "javascript", Program: "exit.js"})
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.Session(start.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 30*time.Second, func() bool { return s.Info().State == dap.StateEnded }, "the program to end")
		return s.Output(0).Output, s.Info().ExitCode
	}
	coldOut, coldCode := run()
	first := awaitWarm(t, m, "node")
	warmOut, warmCode := run()
	if alive(first.Pid) {
		t.Fatalf("the warm node (pid %d) was not the one taken", first.Pid)
	}
	for _, want := range []string{"to stdout\n", "to stderr\n"} {
		if !strings.Contains(warmOut, want) || !strings.Contains(coldOut, want) {
			t.Errorf("output warm %q, cold %q; want both with %q", warmOut, coldOut, want)
		}
	}
	if warmCode == nil || coldCode == nil || *warmCode != 3 || *coldCode != 3 {
		t.Errorf("exit codes warm %v, cold %v; want 3", warmCode, coldCode)
	}
}

// A launch whose environment differs from the warm node's starts its own
// node; once it ended, a warm node for its environment replaces the old.
func TestWarmNodeLaunchWithOtherEnvStartsCold(t *testing.T) {
	root := writeFiles(t, map[string]string{"main.js": jsMain})
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "node")
	req := dap.StartRequest{Language: "javascript", Program: "main.js"}
	startToBreakpoint(t, m, req, "main.js", 4, nil)
	first := awaitWarm(t, m, "node")
	req.Env = map[string]string{"TETHER_WARM_TEST": "other"}
	seen := breakpointFrames(t, m, req, "main.js", 4, "process.env.TETHER_WARM_TEST")
	if seen.exprs != "other" {
		t.Errorf("TETHER_WARM_TEST = %q, want other", seen.exprs)
	}
	testwait.Until(t, 30*time.Second, func() bool {
		w, ok := warmOf(m, "node")
		return ok && w.Pid != first.Pid && !alive(first.Pid)
	}, "a warm node for the new environment replacing pid %d", first.Pid)
}

// With warm adapters off, no node is started ahead of a launch.
func TestWarmNodeOffStartsNone(t *testing.T) {
	root := writeFiles(t, map[string]string{"main.js": jsMain})
	m := newManager(t, root)
	needAdapter(t, m, "node")
	startToBreakpoint(t, m, dap.StartRequest{Language: "javascript", Program: "main.js"}, "main.js", 4, nil)
	if w := m.WarmAdapters(); len(w) != 0 {
		t.Fatalf("warm adapters = %+v with warm adapters off", w)
	}
	if left := descendants(); len(left) != 0 {
		t.Fatalf("processes after the session: %q", left)
	}
}

func TestWarmNodeEndsAfterIdleTime(t *testing.T) {
	root := writeFiles(t, map[string]string{"main.js": jsMain})
	m := newWarmManager(t, root, 200*time.Millisecond)
	needAdapter(t, m, "node")
	startToBreakpoint(t, m, dap.StartRequest{Language: "javascript", Program: "main.js"}, "main.js", 4, nil)
	testwait.Until(t, 30*time.Second, func() bool {
		return m.WarmIdled() == 1 && len(m.WarmAdapters()) == 0
	}, "the warm node to end for idleness")
	if left := descendants(); len(left) > 0 {
		t.Fatalf("processes left after the warm node's idle end: %v", left)
	}
}

func TestWarmNodeEndsWithTheManager(t *testing.T) {
	root := writeFiles(t, map[string]string{"main.js": jsMain})
	m, err := dap.NewManager(dap.Config{Root: root, WarmAdapters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	needAdapter(t, m, "node")
	startToBreakpoint(t, m, dap.StartRequest{Language: "javascript", Program: "main.js"}, "main.js", 4, nil)
	w := awaitWarm(t, m, "node")
	m.Close()
	if alive(w.Pid) {
		t.Fatalf("warm node (pid %d) outlived the manager", w.Pid)
	}
	if left := descendants(); len(left) > 0 {
		t.Fatalf("processes left after Close: %v", left)
	}
}
