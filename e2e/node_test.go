package e2e_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// Node.js debugging through real broker and bridge processes and a real
// node, with tether's built-in CDP adapter (js-debug is not installed here).

// Programs the Node tests run. calc.js: lines 4-6 are mul's body (it
// reads the closure variable k), line 13 calls add(total, mul(i, 2)), line
// 9 is add's body. app.ts: line 9 is `return label;` in describe. throw.js:
// an uncaught exception on line 4. They are shared with dap/node's tests.
var (
	nodeCalcJS  = mustReadFile("../dap/node/testdata/programs/calc.js")
	nodeAppTS   = mustReadFile("../dap/node/testdata/programs/app.ts")
	nodeThrowJS = mustReadFile("../dap/node/testdata/programs/throw.js")
)

const (
	// main.mjs imports lib.mjs, whose line 3 is `return y;`.
	nodeMainMJS = `import { square } from "./lib.mjs";
const values = [2, 3].map(square);
console.log("squares", values.join(","));
`
	nodeLibMJS = `export function square(x) {
  const y = x * x;
  return y;
}
`
	// beat.js: work(n) (line 4 is `return sq;`) called forever; the counter
	// is written to the file "beat".
	nodeBeatJS = `const fs = require("fs");
function work(n) {
  const sq = n * n;
  return sq;
}
let i = 0;
setInterval(() => {
  work(i);
  fs.writeFileSync("beat", String(i));
  i++;
}, 50);
`
)

func nodeOrSkip(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node is not installed: %v", err)
		}
		t.Skipf("node is not installed: %v", err)
	}
	return p
}

func frameAt(t *testing.T, f dap.Frame, file string, line int) {
	t.Helper()
	if filepath.Base(f.Path) != file || f.Line != line {
		t.Fatalf("frame %+v, want %s:%d", f, file, line)
	}
}

// TestNodeCommonJSBreakpointStepsEvaluate: a breakpoint in a function, a
// snapshot asked right after continue with parameters, locals and a
// closure variable, steps over, out and into, and evaluate in the frame.
func TestNodeCommonJSBreakpointStepsEvaluate(t *testing.T) {
	nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"calc.js": nodeCalcJS}, nil)
	var dc dap.DebugContext
	d.ok(bridgeDebugContext, nil, &dc)
	var info *dap.AdapterInfo
	for i := range dc.DebugAdapters {
		if dc.DebugAdapters[i].Name == "node" {
			info = &dc.DebugAdapters[i]
		}
	}
	if info == nil || info.Implementation != "builtin-cdp" || !strings.HasPrefix(info.Version, "v") || dc.NativeDebuggers["node"] == "" || dc.NativeDebuggers["node_version"] == "" {
		t.Fatalf("debug-context adapters %+v native %v: want node (builtin-cdp, with its version)", dc.DebugAdapters, dc.NativeDebuggers)
	}

	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"language": "javascript", "program": "calc.js", "stop_on_entry": true}, &start)
	if start.Adapter != "node" || start.State != dap.StateStopped || start.Stop == nil || start.Stop.Reason != "entry" {
		t.Fatalf("start = %+v (stop %+v), want node stopped on entry", start, start.Stop)
	}
	id := start.SessionID
	var bps dap.SetBreakpointsResult
	d.ok("/api/debug/set-breakpoints", map[string]any{"session_id": id, "path": "calc.js", "breakpoints": []map[string]any{{"line": 5}}}, &bps)
	if len(bps.Breakpoints) != 1 || !bps.Breakpoints[0].Verified || bps.Breakpoints[0].Line != 5 {
		t.Fatalf("breakpoints = %+v, want one verified at line 5", bps.Breakpoints)
	}
	d.ok("/api/debug/continue", map[string]any{"session_id": id}, nil)
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id, "expressions": []string{"p * q"}}, &snap) // must wait
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || snap.Frames[0].Name != "mul" {
		t.Fatalf("stop %+v frames %+v, want breakpoint in mul", snap.Stop, snap.Frames)
	}
	frameAt(t, snap.Frames[0], "calc.js", 5)
	wantLocals(t, snap, map[string]string{"p": "0", "q": "2", "r": "10"})
	closure := ""
	for _, sc := range snap.Scopes {
		for _, v := range sc.Variables {
			if strings.HasPrefix(sc.Name, "Closure") && v.Name == "k" {
				closure = v.Value
			}
		}
	}
	if closure != "10" {
		t.Errorf("closure variable k = %q in scopes %+v, want 10", closure, snap.Scopes)
	}
	if len(snap.Expressions) != 1 || snap.Expressions[0].Result != "0" {
		t.Errorf("p * q = %+v, want 0", snap.Expressions)
	}

	// Second hit: i = 1, so p * q = 2.
	d.ok("/api/debug/continue", map[string]any{"session_id": id}, nil)
	var ev dap.EvalResult
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id}, &snap)
	d.ok("/api/debug/evaluate", map[string]any{"session_id": id, "expression": "p * q"}, &ev)
	if ev.Result != "2" || ev.Type != "number" {
		t.Errorf("evaluate p * q = %+v, want 2 (number)", ev)
	}
	var step dap.ControlResult
	d.ok("/api/debug/step-over", map[string]any{"session_id": id}, &step)
	if step.State != dap.StateStopped || step.Location == nil || step.Location.Name != "mul" || step.Location.Line != 6 {
		t.Fatalf("step-over = %+v at %+v, want mul:6", step, step.Location)
	}
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id}, &snap)
	wantLocals(t, snap, map[string]string{"parts": "Array(2)"})
	d.ok("/api/debug/step-out", map[string]any{"session_id": id}, &step)
	if step.Location == nil || step.Location.Line != 13 {
		t.Fatalf("step-out = %+v, want back in the loop at line 13", step.Location)
	}
	d.ok("/api/debug/step-into", map[string]any{"session_id": id}, &step)
	if step.Location == nil || step.Location.Name != "add" || step.Location.Line != 9 {
		t.Fatalf("step-into = %+v, want add:9", step.Location)
	}
	var stopped dap.StopResult
	d.ok("/api/debug/stop-session", map[string]any{"session_id": id}, &stopped)
	if stopped.State != dap.StateEnded {
		t.Fatalf("stop-session = %+v", stopped)
	}
	if left := dbgProcessesIn(d.root); len(left) != 0 {
		t.Fatalf("processes left after stop-session: %q", left)
	}
	d.fails("/api/debug/snapshot", map[string]any{"session_id": id}, protocol.CodeSessionEnded)
}

// TestNodeESModuleBreakpointBindsBeforeLoad: a breakpoint in an imported
// module, set before the module graph runs, is hit.
func TestNodeESModuleBreakpointBindsBeforeLoad(t *testing.T) {
	nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"main.mjs": nodeMainMJS, "lib.mjs": nodeLibMJS}, nil)
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"language": "javascript", "program": "main.mjs",
		"breakpoints": []map[string]any{{"path": "lib.mjs", "breakpoints": []map[string]any{{"line": 3}}}}}, &start)
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || snap.Frames[0].Name != "square" {
		t.Fatalf("stop %+v frames %+v, want breakpoint in square", snap.Stop, snap.Frames)
	}
	frameAt(t, snap.Frames[0], "lib.mjs", 3)
	wantLocals(t, snap, map[string]string{"x": "2", "y": "4"})
	var cont dap.ControlResult
	d.ok("/api/debug/continue", map[string]any{"session_id": start.SessionID, "wait": true}, &cont)
	if cont.Location == nil || cont.Location.Line != 3 {
		t.Fatalf("second continue = %+v, want the second square call", cont)
	}
	var out dap.OutputResult
	d.ok("/api/debug/continue", map[string]any{"session_id": start.SessionID, "wait": true}, &cont)
	if cont.State != dap.StateEnded || cont.ExitCode == nil || *cont.ExitCode != 0 {
		t.Fatalf("last continue = %+v, want ended with exit code 0", cont)
	}
	d.ok("/api/debug/output", map[string]any{"session_id": start.SessionID}, &out)
	if !strings.Contains(out.Output, "squares 4,9") {
		t.Errorf("output %q lacks the program's line", out.Output)
	}
}

// TestNodeTypeScriptThroughSourceMaps: a program compiled with tsc
// --sourceMap is debugged by its .ts file: the breakpoint on a .ts line
// binds, frames and steps report .ts paths and lines, locals are visible.
func TestNodeTypeScriptThroughSourceMaps(t *testing.T) {
	nodeOrSkip(t)
	tsc := filepath.Join(clientsDir(t), "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatalf("tsc is not installed (make deps-node): %v", err)
	}
	d := startDebugWorkspace(t, map[string]string{"src/app.ts": nodeAppTS}, nil)
	build := exec.Command(tsc, "--sourceMap", "--target", "es2020", "--module", "commonjs", "--outDir", "out", "src/app.ts")
	build.Dir = d.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"config": map[string]any{
		"type": "node", "request": "launch", "name": "ts", "program": "${workspaceFolder}/out/app.js",
		"sourceMaps": true, "outFiles": []string{"${workspaceFolder}/out/**/*.js"}},
		"breakpoints": []map[string]any{{"path": "src/app.ts", "breakpoints": []map[string]any{{"line": 9}}}}}, &start)
	if len(start.Breakpoints) != 1 || !start.Breakpoints[0].Verified || start.Breakpoints[0].Line != 9 || filepath.Ext(start.Breakpoints[0].Path) != ".ts" {
		t.Fatalf("start breakpoints = %+v, want one verified at app.ts:9", start.Breakpoints)
	}
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "expressions": []string{"scaled.x + scaled.y"}}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || snap.Frames[0].Name != "describe" {
		t.Fatalf("stop %+v frames %+v, want breakpoint in describe", snap.Stop, snap.Frames)
	}
	frameAt(t, snap.Frames[0], "app.ts", 9)
	if snap.Frames[0].Path != filepath.Join(d.root, "src", "app.ts") {
		t.Errorf("frame path %s, want the .ts source", snap.Frames[0].Path)
	}
	wantLocals(t, snap, map[string]string{"scale": "10", "label": `"(10, 20)"`})
	if len(snap.Expressions) != 1 || snap.Expressions[0].Result != "30" {
		t.Errorf("scaled.x + scaled.y = %+v, want 30", snap.Expressions)
	}
	if snap.Frames[1].Line != 14 || filepath.Base(snap.Frames[1].Path) != "app.ts" {
		t.Errorf("caller frame %+v, want app.ts:14", snap.Frames[1])
	}
	var step dap.ControlResult
	d.ok("/api/debug/step-out", map[string]any{"session_id": start.SessionID}, &step)
	if step.Location == nil || filepath.Base(step.Location.Path) != "app.ts" || step.Location.Line != 14 {
		t.Fatalf("step-out location %+v, want app.ts:14", step.Location)
	}
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
}

// TestNodeConditionHitCountAndLogpoint: a conditional breakpoint stops
// only when its condition holds, a hit-count one from its Nth hit, and a
// logpoint's lines come back through /api/debug/output.
func TestNodeConditionHitCountAndLogpoint(t *testing.T) {
	nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"calc.js": nodeCalcJS}, nil)
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"language": "javascript", "program": "calc.js",
		"breakpoints": []map[string]any{{"path": "calc.js", "breakpoints": []map[string]any{
			{"line": 6, "condition": "p === 2"},
			{"line": 9, "hit_condition": "3"},
			{"line": 14, "log_message": "logpoint i={i} total={total}"},
		}}}}, &start)
	if len(start.Breakpoints) != 3 {
		t.Fatalf("start breakpoints = %+v", start.Breakpoints)
	}
	id := start.SessionID
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id}, &snap)
	frameAt(t, snap.Frames[0], "calc.js", 6)
	wantLocals(t, snap, map[string]string{"p": "2", "q": "2"}) // i = 2: the condition skipped i = 0, 1
	var cont dap.ControlResult
	d.ok("/api/debug/continue", map[string]any{"session_id": id, "wait": true}, &cont)
	if cont.Location == nil || cont.Location.Name != "add" || cont.Location.Line != 9 {
		t.Fatalf("continue = %+v, want the third add call", cont.Location)
	}
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id}, &snap)
	wantLocals(t, snap, map[string]string{"a": "22", "b": "14"}) // the third call: total 22, mul(2, 2)
	var out dap.OutputResult
	d.ok("/api/debug/output", map[string]any{"session_id": id}, &out)
	for _, want := range []string{"logpoint i=0 total=10", "logpoint i=1 total=22", "step 1 22"} {
		if !strings.Contains(out.Output, want) {
			t.Errorf("output %q lacks %q", out.Output, want)
		}
	}
	if strings.Contains(out.Output, "logpoint i=2") {
		t.Errorf("output %q has a logpoint from after the stop", out.Output)
	}
	d.ok("/api/debug/stop-session", map[string]any{"session_id": id}, nil)
}

// TestNodeUncaughtExceptionStops: with exception filter uncaught the
// program stops at the throw with reason exception and the error's text.
func TestNodeUncaughtExceptionStops(t *testing.T) {
	nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"throw.js": nodeThrowJS}, nil)
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"language": "javascript", "program": "throw.js", "exception_filters": []string{"uncaught"}}, &start)
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "exception" || !strings.Contains(snap.Stop.Text, "RangeError: n too large: 3") {
		t.Fatalf("stop %+v, want exception RangeError: n too large: 3", snap.Stop)
	}
	frameAt(t, snap.Frames[0], "throw.js", 4)
	wantLocals(t, snap, map[string]string{"n": "3", "err": "RangeError: n too large: 3"}) // block and function scope: one Local
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
}

// nodeInspectPort reads the port of a node started with --inspect=0 from
// its stderr ("Debugger listening on ws://127.0.0.1:PORT/…").
func nodeInspectPort(t *testing.T, stderr *bufio.Reader) int {
	t.Helper()
	re := regexp.MustCompile(`ws://127\.0\.0\.1:(\d+)/`)
	lines := make(chan string)
	go func() {
		for {
			line, err := stderr.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("node exited before listening")
			}
			if m := re.FindStringSubmatch(line); m != nil {
				port, _ := strconv.Atoi(m[1])
				go func() { // keep draining so node never blocks on stderr
					for range lines {
					}
				}()
				return port
			}
		case <-deadline:
			t.Fatal("node printed no inspector URL within 10s")
		}
	}
}

// TestNodeAttachByInspectorPortAndPid attaches to a node started with
// --inspect=0 (by host and port) and to a plain running node (by pid,
// through SIGUSR1), breaks in the function it calls in a loop, and detaches
// leaving each running.
func TestNodeAttachByInspectorPortAndPid(t *testing.T) {
	node := nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"beat.js": nodeBeatJS}, nil)
	check := func(t *testing.T, d *debugWorkspace, prog *dbgAttachTarget, payload map[string]any) {
		var start dap.StartResult
		d.ok("/api/debug/start-session", payload, &start)
		if start.Adapter != "node" {
			t.Fatalf("start = %+v", start)
		}
		var bps dap.SetBreakpointsResult
		d.ok("/api/debug/set-breakpoints", map[string]any{"session_id": start.SessionID, "path": "beat.js", "breakpoints": []map[string]any{{"line": 4}}}, &bps)
		if len(bps.Breakpoints) != 1 || !bps.Breakpoints[0].Verified {
			t.Fatalf("breakpoints = %+v, want one verified", bps.Breakpoints)
		}
		var snap dap.Snapshot
		d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "wait_timeout_ms": 10000}, &snap)
		if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || snap.Frames[0].Name != "work" {
			t.Fatalf("stop %+v frames %+v, want breakpoint in work", snap.Stop, snap.Frames)
		}
		n, err := strconv.Atoi(dbgLocal(t, snap.Locals, "n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := dbgLocal(t, snap.Locals, "sq"); got != strconv.Itoa(n*n) {
			t.Errorf("sq = %s with n = %d", got, n)
		}
		d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
		prog.checkDetached()
	}

	t.Run("inspect port", func(t *testing.T) {
		cmd := exec.Command(node, "--inspect=127.0.0.1:0", "beat.js")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		prog := startAttachTarget(t, d.root, cmd, nil)
		port := nodeInspectPort(t, bufio.NewReader(stderr))
		testwait.Until(t, 10*time.Second, func() bool { return prog.beatPast(-1) }, "the program's first beat")
		check(t, d, prog, map[string]any{"language": "javascript", "request": "attach", "connect": map[string]any{"host": "127.0.0.1", "port": port}})
	})
	t.Run("pid", func(t *testing.T) {
		if l, err := net.Listen("tcp", "127.0.0.1:9229"); err != nil {
			t.Skipf("the default inspector port 9229 is taken on this machine: %v", err)
		} else {
			_ = l.Close()
		}
		_ = os.Remove(filepath.Join(d.root, "beat"))
		prog := startAttachTarget(t, d.root, exec.Command(node, "beat.js"), nil)
		testwait.Until(t, 10*time.Second, func() bool { return prog.beatPast(-1) }, "the program's first beat")
		check(t, d, prog, map[string]any{"language": "javascript", "request": "attach", "pid": prog.cmd.Process.Pid})
	})
}

// TestNodeTwoSessionsAndCAtOnce runs two Node sessions and a C session
// side by side, all stopped, and checks their snapshots are their own.
func TestNodeTwoSessionsAndCAtOnce(t *testing.T) {
	nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"calc.js": nodeCalcJS, "main.mjs": nodeMainMJS, "lib.mjs": nodeLibMJS, "add_numbers.c": dbgAddNumbersC}, nil)
	d.build("add_numbers.c", "add_numbers")
	var a, b, c dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"language": "javascript", "program": "calc.js",
		"breakpoints": []map[string]any{{"path": "calc.js", "breakpoints": []map[string]any{{"line": 6, "condition": "p === 3"}}}}}, &a)
	d.ok("/api/debug/start-session", map[string]any{"language": "javascript", "program": "main.mjs",
		"breakpoints": []map[string]any{{"path": "lib.mjs", "breakpoints": []map[string]any{{"line": 3}}}}}, &b)
	d.ok("/api/debug/start-session", map[string]any{"language": "c", "program": "add_numbers",
		"breakpoints": []map[string]any{{"path": "add_numbers.c", "breakpoints": []map[string]any{{"line": 4}}}}}, &c)
	var sa, sb, sc dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": a.SessionID}, &sa)
	d.ok("/api/debug/snapshot", map[string]any{"session_id": b.SessionID}, &sb)
	d.ok("/api/debug/snapshot", map[string]any{"session_id": c.SessionID}, &sc)
	wantLocals(t, sa, map[string]string{"p": "3", "q": "2", "r": "16"})
	wantLocals(t, sb, map[string]string{"x": "2", "y": "4"})
	wantLocals(t, sc, map[string]string{"a": "2", "b": "3", "sum": "5"})
	if sa.Frames[0].Name != "mul" || sb.Frames[0].Name != "square" || !strings.Contains(sc.Frames[0].Name, "add_numbers") {
		t.Fatalf("snapshots mixed: %+v / %+v / %+v", sa.Frames[0], sb.Frames[0], sc.Frames[0])
	}
	var list dap.SessionList
	d.ok("/api/debug/list-sessions", nil, &list)
	if len(list.Sessions) != 3 {
		t.Fatalf("list-sessions = %+v", list.Sessions)
	}
	// Left running on purpose: the bridge's shutdown must end all three.
}

// TestNodeKilledBridgeLeavesNoNode: a bridge killed with SIGKILL while a
// Node session is stopped leaves no node behind.
func TestNodeKilledBridgeLeavesNoNode(t *testing.T) {
	nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"calc.js": nodeCalcJS}, nil)
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"language": "javascript", "program": "calc.js", "stop_on_entry": true}, &start)
	if left := dbgProcessesIn(d.root); len(left) != 1 || !strings.Contains(left[0], "node") {
		t.Fatalf("processes of the session %q, want its node", left)
	}
	d.bridge.stop(syscall.SIGKILL, 10*time.Second)
	var left []string
	if !testwait.Within(5*time.Second, func() bool { left = dbgProcessesIn(d.root); return len(left) == 0 }) {
		t.Fatalf("processes left after 5s: %q", left)
	}
}

// TestNodeBadInputAnswersAtOnce: no node on PATH, a program that does not
// exist, a program that crashes at start, and an inspector that never
// prints its URL each get a coded answer in time, and leave no process.
func TestNodeBadInputAnswersAtOnce(t *testing.T) {
	nodeOrSkip(t)
	t.Run("no node", func(t *testing.T) {
		d := startDebugWorkspace(t, map[string]string{"calc.js": nodeCalcJS}, []string{"PATH=", "HOME=" + t.TempDir()})
		for _, payload := range []map[string]any{
			{"language": "javascript", "program": "calc.js"},
			{"config": map[string]any{"type": "pwa-node", "request": "launch", "program": "calc.js"}},
		} {
			r := d.fails("/api/debug/start-session", payload, protocol.CodeDebugAdapterUnavailable)
			if r.elapsed > time.Second || !strings.Contains(r.resp.Message, "install Node.js") {
				t.Errorf("%v: %q after %s, want at once naming what to install", payload, r.resp.Message, r.elapsed)
			}
		}
	})
	silent := "#!/bin/sh\nexec sleep 60\n"
	d := startDebugWorkspace(t, map[string]string{"calc.js": nodeCalcJS, "broken.js": "function (\n", "silent-node": silent}, nil)
	if err := os.Chmod(filepath.Join(d.root, "silent-node"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Run("missing program", func(t *testing.T) {
		r := d.fails("/api/debug/start-session", map[string]any{"language": "javascript", "program": "nope.js"}, protocol.CodeInvalidPayload)
		if r.elapsed > time.Second || !strings.Contains(r.resp.Message, "nope.js") {
			t.Errorf("%q after %s, want at once naming the program", r.resp.Message, r.elapsed)
		}
	})
	t.Run("crash at start", func(t *testing.T) {
		r := d.fails("/api/debug/start-session", map[string]any{"language": "javascript", "program": "broken.js"}, protocol.CodeSessionEnded)
		if !strings.Contains(r.resp.Message, "SyntaxError") || !strings.Contains(r.resp.Message, "exit code 1") {
			t.Errorf("crash at start: %q, want its stderr (SyntaxError) and exit code", r.resp.Message)
		}
	})
	silentLaunch := map[string]any{"config": map[string]any{"type": "node", "request": "launch", "program": "calc.js",
		"runtimeExecutable": filepath.Join(d.root, "silent-node")}}
	t.Run("no inspector URL", func(t *testing.T) {
		// A fake node (a shell script that prints nothing), since a real
		// node always prints its URL.
		r := d.call("/api/debug/start-session", silentLaunch, 30)
		if r.resp.Success || !strings.Contains(r.resp.Message, "no inspector URL within 10s") {
			t.Fatalf("silent node: %+v, want an error naming the missing inspector URL", r.resp)
		}
		if r.elapsed > 14*time.Second {
			t.Errorf("answered after %s, want about 10s", r.elapsed)
		}
		var left []string
		if !testwait.Within(time.Second, func() bool { left = dbgProcessesIn(d.root); return len(left) == 0 }) {
			t.Fatalf("processes left after 1s: %q", left)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		r := d.call("/api/debug/start-session", silentLaunch, 3)
		if r.resp.Success || r.elapsed > 4*time.Second {
			t.Fatalf("start-session with a 3s deadline: %+v after %s, want a failure within it", r.resp, r.elapsed)
		}
		var left []string
		if !testwait.Within(5*time.Second, func() bool { left = dbgProcessesIn(d.root); return len(left) == 0 }) {
			t.Fatalf("processes left after 5s: %q", left)
		}
	})
}

// TestNodeLaunchJSONConfig starts a pwa-node configuration from
// .vscode/launch.json with args, env, runtimeArgs and stopOnEntry.
func TestNodeLaunchJSONConfig(t *testing.T) {
	nodeOrSkip(t)
	prog := `const greeting = process.env.GREETING + " " + process.argv[2];
const strict = process.execArgv.includes("--no-warnings");
console.log(greeting, strict);
`
	launch := `{
  // comments and trailing commas, as VS Code writes them
  "configurations": [
    {"name": "Run greet", "type": "pwa-node", "request": "launch", "program": "${workspaceFolder}/greet.js",
     "args": ["world"], "env": {"GREETING": "hello"}, "runtimeArgs": ["--no-warnings"], "stopOnEntry": true,},
  ],
}`
	d := startDebugWorkspace(t, map[string]string{"greet.js": prog, ".vscode/launch.json": launch}, nil)
	var dc dap.DebugContext
	d.ok(bridgeDebugContext, nil, &dc)
	if len(dc.LaunchConfigs) != 1 || dc.LaunchConfigs[0].Type() != "pwa-node" {
		t.Fatalf("launch configs %+v", dc.LaunchConfigs)
	}
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"config_name": "Run greet"}, &start)
	if start.State != dap.StateStopped || start.Stop == nil || start.Stop.Reason != "entry" {
		t.Fatalf("start = %+v (stop %+v), want stopped on entry", start, start.Stop)
	}
	var cont dap.ControlResult
	d.ok("/api/debug/continue", map[string]any{"session_id": start.SessionID, "wait": true}, &cont)
	var out dap.OutputResult
	d.ok("/api/debug/output", map[string]any{"session_id": start.SessionID}, &out)
	if !strings.Contains(out.Output, "hello world true") {
		t.Fatalf("output %q, want the env, args and runtimeArgs applied", out.Output)
	}
}
