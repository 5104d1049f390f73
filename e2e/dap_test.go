package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// dbgAddNumbersC is the seed scenario's program, shared with dap's own
// tests; its line 4 is `return sum;`.
var dbgAddNumbersC = mustReadFile("../dap/testdata/add_numbers.c")

func mustReadFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Programs the debug tests run.
const (
	// calc.py: line 5 is `return r` in mul, line 11 the print in the loop.
	dbgCalcPy = `import sys

def mul(x, y):
    r = x * y
    return r

def main():
    total = 0
    for i in range(5):
        total += mul(i, 2)
        print("step", i, total)
    raise ValueError("boom")

main()
`
	// loop.c: line 5 is `return doubled;` in tick, called forever.
	dbgLoopC = `#include <stdio.h>
#include <unistd.h>
int tick(int n) {
    int doubled = n * 2;
    return doubled;
}
int main(void) {
    for (int i = 0; ; i++) {
        tick(i);
        usleep(50000);
    }
}
`
	// main.go: line 6 is `return a + b` in add.
	dbgMainGo = `package main

import "fmt"

func add(a, b int) int {
	return a + b
}

func main() {
	s := add(4, 5)
	fmt.Println("s =", s)
}
`
)

// debugWorkspace is one broker, one bridge serving root, and a caller.
type debugWorkspace struct {
	t      *testing.T
	b      *brokerProc
	bridge *proc
	ws     string
	tok    string
	root   string
}

// startDebugWorkspace writes files into a fresh root and serves it with a
// bridge whose environment is env (nil: this process's). Its warm adapters
// are off unless env sets TETHER_WARM_ADAPTERS: the tests check that a
// stop-session leaves no process in the root, where a warm adapter (which
// works there) would be; TestDebugWarmAdaptersThroughTheBridge turns them on.
func startDebugWorkspace(t *testing.T, files map[string]string, env []string) *debugWorkspace {
	t.Helper()
	if env == nil {
		env = os.Environ()
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TETHER_WARM_ADAPTERS=") }) {
		env = append(env[:len(env):len(env)], "TETHER_WARM_ADAPTERS=false")
	}
	root := t.TempDir()
	writeFiles(t, root, files)
	b := startBroker(t)
	ws := "dbg-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	args := []string{"bridge", "--broker", b.url, "--workspace", ws, "--token", token(t, auth.RoleBridge, ws), "--root", root, "--log-level", "debug"}
	cmd := exec.Command(tetherBin, args...)
	cmd.Env = env
	p := start(t, "bridge "+ws, cmd)
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "%s holding %s", b.name, ws)
	d := &debugWorkspace{t: t, b: b, bridge: p, ws: ws, tok: token(t, auth.RoleCaller, ws), root: root}
	// Registered after start's cleanup, so it runs first: with the bridge
	// still up, then again after it stopped.
	t.Cleanup(d.checkNoProcessesLeft)
	return d
}

// call sends one call and returns the response.
func (d *debugWorkspace) call(endpoint string, payload any, timeout float64) callResult {
	d.t.Helper()
	body, _ := json.Marshal(map[string]any{"endpoint": endpoint, "payload": payload, "timeout": timeout})
	r := d.b.call(d.ws, d.tok, string(body))
	if r.err != nil {
		d.t.Fatalf("%s: %v", endpoint, r.err)
	}
	return r
}

// ok sends a call that must succeed and decodes its result into out.
func (d *debugWorkspace) ok(endpoint string, payload, out any) {
	d.t.Helper()
	r := d.call(endpoint, payload, 60)
	if !r.resp.Success {
		d.t.Fatalf("%s %v: %s: %s", endpoint, payload, r.resp.Error, r.resp.Message)
	}
	if out != nil {
		if err := json.Unmarshal(r.resp.Result, out); err != nil {
			d.t.Fatalf("%s result %s: %v", endpoint, r.resp.Result, err)
		}
	}
}

// fails sends a call that must fail with code.
func (d *debugWorkspace) fails(endpoint string, payload any, code string) callResult {
	d.t.Helper()
	r := d.call(endpoint, payload, 30)
	if r.resp.Success || r.resp.Error != code {
		d.t.Fatalf("%s: got success=%v %s %q (%s), want %s", endpoint, r.resp.Success, r.resp.Error, r.resp.Message, r.resp.Result, code)
	}
	return r
}

// build compiles a C file in the root through /api/terminal/execute, or
// here when the terminal routes are not mounted.
func (d *debugWorkspace) build(src, out string) {
	d.t.Helper()
	command := fmt.Sprintf("gcc -g -O0 -o %s %s", out, src)
	r := d.call("/api/terminal/execute", map[string]any{"command": command, "timeout": 60}, 70)
	if r.resp.Error == protocol.CodeUnknownRoute {
		cmd := exec.Command("gcc", "-g", "-O0", "-o", out, src)
		cmd.Dir = d.root
		if b, err := cmd.CombinedOutput(); err != nil {
			d.t.Fatalf("gcc: %v\n%s", err, b)
		}
		return
	}
	var res struct {
		Success  bool   `json:"success"`
		Output   string `json:"output"`
		ExitCode int    `json:"exit_code"`
	}
	_ = json.Unmarshal(r.resp.Result, &res)
	if !r.resp.Success || !res.Success {
		d.t.Fatalf("terminal execute %q: %s %s %s", command, r.resp.Error, r.resp.Message, r.resp.Result)
	}
	if _, err := os.Stat(filepath.Join(d.root, out)); err != nil {
		d.t.Fatalf("%s not built: %v", out, err)
	}
}

// dbgProcessesIn lists live processes that belong to this workspace: running
// a binary from the root, naming the root on their command line, or
// working in it (adapters start in the program's directory).
func dbgProcessesIn(root string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := strconv.Itoa(os.Getpid())
	for _, dir := range dirs {
		pid := filepath.Base(dir)
		if pid == self {
			continue
		}
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			if f := strings.Fields(string(stat)[i+1:]); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
				continue
			}
		}
		exe, _ := os.Readlink(dir + "/exe")
		cwd, _ := os.Readlink(dir + "/cwd")
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		cl := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if strings.HasPrefix(exe, root) || strings.HasPrefix(cwd, root) || strings.Contains(cl, root) {
			if strings.Contains(cl, "tether bridge") || strings.HasSuffix(exe, "/tether") {
				continue // the bridge itself is stopped by the harness
			}
			out = append(out, pid+" "+cl)
		}
	}
	return out
}

func (d *debugWorkspace) checkNoProcessesLeft() {
	d.t.Helper()
	// Stop the bridge first: its Run must end every session it still holds.
	d.bridge.stop(syscall.SIGTERM, 15*time.Second)
	var left []string
	if testwait.Within(5*time.Second, func() bool { left = dbgProcessesIn(d.root); return len(left) == 0 }) {
		return
	}
	d.t.Errorf("processes outlived the bridge: %q", left)
	for _, l := range left {
		if pid, err := strconv.Atoi(strings.Fields(l)[0]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func dbgLocal(t *testing.T, vars []dap.Variable, name string) string {
	t.Helper()
	for _, v := range vars {
		if v.Name == name {
			return v.Value
		}
	}
	t.Fatalf("no local %q in %+v", name, vars)
	return ""
}

func wantLocals(t *testing.T, snap dap.Snapshot, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := dbgLocal(t, snap.Locals, name); got != v {
			t.Errorf("local %s = %s, want %s", name, got, v)
		}
	}
}

func dbgHasAdapter(dc dap.DebugContext, name string) bool {
	for _, a := range dc.DebugAdapters {
		if a.Name == name {
			return true
		}
	}
	return false
}

// TestDebugCSeedScenario is the headline: build with gcc through the
// terminal, break in add_numbers, snapshot right after continue, step,
// evaluate, stop, and no lldb left.
func TestDebugCSeedScenario(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"add_numbers.c": dbgAddNumbersC}, nil)
	d.build("add_numbers.c", "add_numbers")

	var dc dap.DebugContext
	d.ok(bridgeDebugContext, nil, &dc)
	if !dbgHasAdapter(dc, "lldb-dap") || dc.NativeDebuggers["lldb_dap"] == "" {
		t.Fatalf("debug-context adapters %+v native %v: want lldb-dap with its path", dc.DebugAdapters, dc.NativeDebuggers)
	}
	foundGcc := false
	for _, c := range dc.InferredCommands {
		foundGcc = foundGcc || strings.Contains(c.Command, "gcc -g -O0 -o add_numbers add_numbers.c")
	}
	if !foundGcc {
		t.Errorf("inferred_commands %+v: want the gcc build of add_numbers.c", dc.InferredCommands)
	}

	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"language": "c", "program": "add_numbers", "stop_on_entry": true}, &start)
	if start.Adapter != "lldb-dap" || start.State != dap.StateStopped || start.Stop == nil || start.Stop.Reason != "entry" {
		t.Fatalf("start = %+v (stop %+v), want lldb-dap stopped on entry", start, start.Stop)
	}
	id := start.SessionID

	var bps dap.SetBreakpointsResult
	d.ok("/api/debug/set-breakpoints", map[string]any{"session_id": id, "path": "add_numbers.c", "breakpoints": []map[string]any{{"line": 4}}}, &bps)
	if len(bps.Breakpoints) != 1 || !bps.Breakpoints[0].Verified || bps.Breakpoints[0].Line != 4 {
		t.Fatalf("breakpoints = %+v, want one verified at line 4", bps.Breakpoints)
	}
	d.ok("/api/debug/continue", map[string]any{"session_id": id}, nil)
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id}, &snap) // must wait, not fail
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 || snap.Frames[0].Line != 4 || snap.Frames[0].Name == "" {
		t.Fatalf("snapshot stop %+v frames %+v, want breakpoint at add_numbers.c:4", snap.Stop, snap.Frames)
	}
	wantLocals(t, snap, map[string]string{"a": "2", "b": "3", "sum": "5"})

	var ev dap.EvalResult
	d.ok("/api/debug/evaluate", map[string]any{"session_id": id, "expression": "a+b"}, &ev)
	if ev.Result != "5" {
		t.Errorf("evaluate a+b = %+v, want 5", ev)
	}
	var step dap.ControlResult
	d.ok("/api/debug/step-over", map[string]any{"session_id": id}, &step)
	if step.State != dap.StateStopped || step.Location == nil || step.Location.Line != 5 {
		t.Fatalf("step-over = %+v at %+v, want stopped at line 5", step, step.Location)
	}
	d.ok("/api/debug/step-out", map[string]any{"session_id": id}, &step)
	if step.Location == nil || step.Location.Line != 8 || !strings.Contains(step.Location.Name, "main") {
		t.Fatalf("step-out location %+v, want main:8", step.Location)
	}
	d.ok("/api/debug/step-over", map[string]any{"session_id": id}, &step)
	if step.Location == nil || step.Location.Line != 9 {
		t.Fatalf("step-over location %+v, want line 9", step.Location)
	}
	d.ok("/api/debug/step-into", map[string]any{"session_id": id}, &step)
	if step.Location == nil || step.Location.Line != 3 || !strings.Contains(step.Location.Name, "add_numbers") {
		t.Fatalf("step-into location %+v, want add_numbers:3", step.Location)
	}

	var list dap.SessionList
	d.ok("/api/debug/list-sessions", nil, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != id || list.Sessions[0].State != dap.StateStopped {
		t.Fatalf("list-sessions = %+v", list.Sessions)
	}
	var stopped dap.StopResult
	d.ok("/api/debug/stop-session", map[string]any{"session_id": id}, &stopped)
	if stopped.State != dap.StateEnded {
		t.Fatalf("stop-session = %+v", stopped)
	}
	for _, p := range dbgProcessesIn(d.root) {
		if !strings.Contains(p, "bash") { // the terminal's visible shell lives on
			t.Fatalf("process left after stop-session: %q", p)
		}
	}
	if left := dbgProcessesNamed("lldb-server", "lldb-dap"); len(left) != 0 {
		// Other engineers may debug on this machine; only report.
		t.Logf("lldb processes on the machine after stop-session (not necessarily ours): %q", left)
	}
	d.fails("/api/debug/snapshot", map[string]any{"session_id": id}, protocol.CodeSessionEnded)
	d.fails("/api/debug/snapshot", map[string]any{"session_id": "dbg-nope"}, protocol.CodeSessionNotFound)
}

const bridgeDebugContext = "/api/workspace/debug-context"

// dbgProcessesNamed lists live processes whose command name starts with one
// of names.
func dbgProcessesNamed(names ...string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		comm := strings.TrimSpace(string(b))
		for _, n := range names {
			if strings.HasPrefix(comm, n) {
				out = append(out, filepath.Base(filepath.Dir(f))+" "+comm)
			}
		}
	}
	return out
}

// TestDebugPythonDebugpy: a conditional breakpoint that stops only when its
// condition holds, a logpoint whose output is captured, locals, and an
// uncaught exception stopping with reason exception.
func TestDebugPythonDebugpy(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"calc.py": dbgCalcPy}, nil)
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "python", "program": "calc.py",
		"breakpoints": []map[string]any{
			{"path": "calc.py", "breakpoints": []map[string]any{
				{"line": 5, "condition": "x == 3"},
				{"line": 11, "log_message": "logpoint total={total}"},
			}},
		},
	}, &start)
	if start.Adapter != "debugpy" || len(start.Breakpoints) != 2 {
		t.Fatalf("start = %+v", start)
	}
	id := start.SessionID
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id, "wait_timeout_ms": 15000, "expressions": []string{"x * y"}}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || snap.Frames[0].Line != 5 || snap.Frames[0].Name != "mul" {
		t.Fatalf("stop %+v at %+v, want breakpoint in mul line 5", snap.Stop, snap.Frames)
	}
	wantLocals(t, snap, map[string]string{"x": "3", "y": "2", "r": "6"})
	if len(snap.Expressions) != 1 || snap.Expressions[0].Result != "6" {
		t.Errorf("x * y = %+v, want 6", snap.Expressions)
	}
	var out dap.OutputResult
	d.ok("/api/debug/output", map[string]any{"session_id": id, "offset": 0}, &out)
	for _, want := range []string{"logpoint total=0", "logpoint total=2", "logpoint total=6", "step 2 6"} {
		if !strings.Contains(out.Output, want) {
			t.Errorf("output %q lacks %q", out.Output, want)
		}
	}
	if strings.Contains(out.Output, "logpoint total=12") {
		t.Errorf("output %q has a logpoint from after the stop", out.Output)
	}
	// x == 4 must not stop: the next stop is the uncaught exception.
	var cont dap.ControlResult
	d.ok("/api/debug/continue", map[string]any{"session_id": id, "wait": true}, &cont)
	if cont.Stop == nil || cont.Stop.Reason != "exception" {
		t.Fatalf("continue = %+v stop %+v, want exception", cont, cont.Stop)
	}
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id}, &snap)
	if snap.Frames[0].Name != "main" || snap.Frames[0].Line != 12 {
		t.Errorf("exception at %+v, want main:12", snap.Frames[0])
	}
	wantLocals(t, snap, map[string]string{"total": "20"})
	var next dap.OutputResult
	d.ok("/api/debug/output", map[string]any{"session_id": id, "offset": out.NextOffset}, &next)
	if next.Offset != out.NextOffset || !strings.Contains(next.Output, "logpoint total=20") || strings.Contains(next.Output, "logpoint total=0") {
		t.Errorf("output from %d = %+v", out.NextOffset, next)
	}
	d.ok("/api/debug/stop-session", map[string]any{"session_id": id}, nil)
}

// TestDebugGoDelve builds and debugs a Go program through delve.
func TestDebugGoDelve(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"go.mod": "module example.com/adder\n\ngo 1.22\n", "main.go": dbgMainGo}, nil)
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "go", "program": ".",
		"breakpoints": []map[string]any{{"path": "main.go", "breakpoints": []map[string]any{{"line": 6}}}},
	}, &start)
	if start.Adapter != "delve" || len(start.Breakpoints) != 1 || !start.Breakpoints[0].Verified {
		t.Fatalf("start = %+v", start)
	}
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "wait_timeout_ms": 20000}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || snap.Frames[0].Line != 6 || !strings.HasSuffix(snap.Frames[0].Name, "add") {
		t.Fatalf("stop %+v at %+v, want breakpoint in add line 6", snap.Stop, snap.Frames)
	}
	wantLocals(t, snap, map[string]string{"a": "4", "b": "5"})
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
}

// TestDebugLaunchJSONConfigName starts a session by config_name from a
// launch.json with comments, trailing commas and ${workspaceFolder}; the
// cppdbg config runs on lldb-dap.
func TestDebugLaunchJSONConfigName(t *testing.T) {
	launch := `{
  // written by hand
  "version": "0.2.0",
  "configurations": [
    {
      "name": "Debug add_numbers",
      "type": "cppdbg", /* Microsoft C/C++ */
      "request": "launch",
      "program": "${workspaceFolder}/add_numbers",
      "args": [],
      "stopAtEntry": false,
      "cwd": "${workspaceFolder}",
      "environment": [{"name": "GREETING", "value": "hi"}],
      "MIMode": "gdb",
    },
  ],
}`
	d := startDebugWorkspace(t, map[string]string{"add_numbers.c": dbgAddNumbersC, ".vscode/launch.json": launch}, nil)
	d.build("add_numbers.c", "add_numbers")
	var dc dap.DebugContext
	d.ok(bridgeDebugContext, nil, &dc)
	if len(dc.LaunchConfigs) != 1 || dc.LaunchConfigs[0]["program"] != filepath.Join(d.root, "add_numbers") {
		t.Fatalf("launch_configs = %+v (error %q)", dc.LaunchConfigs, dc.LaunchError)
	}
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"config_name": "Debug add_numbers",
		"breakpoints": []map[string]any{{"path": "add_numbers.c", "breakpoints": []map[string]any{{"line": 4}}}},
	}, &start)
	if start.Adapter != "lldb-dap" {
		t.Fatalf("cppdbg ran on %q, want lldb-dap", start.Adapter)
	}
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "expressions": []string{"(char*)getenv(\"GREETING\")"}}, &snap)
	wantLocals(t, snap, map[string]string{"a": "2", "b": "3", "sum": "5"})
	if len(snap.Expressions) != 1 || !strings.Contains(snap.Expressions[0].Result, `"hi"`) {
		t.Errorf("environment not passed: %+v", snap.Expressions)
	}
	d.fails("/api/debug/start-session", map[string]any{"config_name": "nope"}, protocol.CodeInvalidPayload)
}

// TestDebugAttachByPid attaches lldb-dap to a running program, breaks in
// the function it calls in a loop, and detaches leaving it running.
func TestDebugAttachByPid(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"loop.c": dbgLoopC}, nil)
	d.build("loop.c", "loop")
	prog := exec.Command(filepath.Join(d.root, "loop"))
	prog.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{}, syscall.SIGKILL)
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = prog.Wait(); close(exited) }()
	// Registered after the workspace's check, so it runs before it.
	t.Cleanup(func() { _ = prog.Process.Kill(); <-exited })

	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "c", "request": "attach", "pid": prog.Process.Pid,
		"breakpoints": []map[string]any{{"path": "loop.c", "breakpoints": []map[string]any{{"line": 5}}}},
	}, &start)
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || snap.Frames[0].Line != 5 || !strings.Contains(snap.Frames[0].Name, "tick") {
		t.Fatalf("stop %+v at %+v, want breakpoint in tick line 5", snap.Stop, snap.Frames)
	}
	n, _ := strconv.Atoi(dbgLocal(t, snap.Locals, "n"))
	if got := dbgLocal(t, snap.Locals, "doubled"); got != strconv.Itoa(2*n) {
		t.Errorf("doubled = %s with n = %d", got, n)
	}
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
	// Detached: the program keeps running, not traced, not stopped. It
	// prints nothing to await; time passes to show that it does not end.
	time.Sleep(300 * time.Millisecond)
	select {
	case <-exited:
		t.Fatal("the attached program ended with the session")
	default:
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", prog.Process.Pid))
	if !strings.Contains(string(status), "TracerPid:\t0") || strings.Contains(string(status), "State:\tt") || strings.Contains(string(status), "State:\tT") {
		t.Fatalf("program after detach:\n%s", status)
	}
}

// TestDebugMissingAdapterAnswersUnavailable: with nothing on PATH the
// bridge answers debug_adapter_unavailable at once, naming what to install.
func TestDebugMissingAdapterAnswersUnavailable(t *testing.T) {
	env := []string{"PATH=", "HOME=" + os.Getenv("HOME")}
	d := startDebugWorkspace(t, map[string]string{"add_numbers.c": dbgAddNumbersC}, env)
	for _, payload := range []map[string]any{
		{"language": "c", "program": "add_numbers"},
		{"config": map[string]any{"type": "cppdbg", "request": "launch", "program": "add_numbers"}},
		{"language": "go", "program": "."},
		{"config": map[string]any{"type": "node", "request": "launch", "program": "x.js"}},
	} {
		r := d.fails("/api/debug/start-session", payload, protocol.CodeDebugAdapterUnavailable)
		if r.elapsed > time.Second {
			t.Errorf("%v answered after %s, want within 1s", payload, r.elapsed)
		}
		if !strings.Contains(r.resp.Message, "install") && !strings.Contains(r.resp.Message, "not supported") {
			t.Errorf("message %q names nothing to install", r.resp.Message)
		}
	}
	var dc dap.DebugContext
	d.ok(bridgeDebugContext, nil, &dc)
	if dbgHasAdapter(dc, "lldb-dap") || dbgHasAdapter(dc, "delve") {
		t.Errorf("debug_adapters = %+v with an empty PATH", dc.DebugAdapters)
	}
}

// TestDebugTwoSessionsAtOnce runs a C and a Python session side by side,
// both stopped at breakpoints, and checks their snapshots are their own.
func TestDebugTwoSessionsAtOnce(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"add_numbers.c": dbgAddNumbersC, "calc.py": dbgCalcPy}, nil)
	d.build("add_numbers.c", "add_numbers")
	var c, py dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "c", "program": "add_numbers",
		"breakpoints": []map[string]any{{"path": "add_numbers.c", "breakpoints": []map[string]any{{"line": 4}}}},
	}, &c)
	d.ok("/api/debug/start-session", map[string]any{
		"language": "python", "program": "calc.py",
		"breakpoints": []map[string]any{{"path": "calc.py", "breakpoints": []map[string]any{{"line": 5, "condition": "x == 2"}}}},
	}, &py)
	var cs, ps dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": c.SessionID}, &cs)
	d.ok("/api/debug/snapshot", map[string]any{"session_id": py.SessionID, "wait_timeout_ms": 15000}, &ps)
	wantLocals(t, cs, map[string]string{"a": "2", "b": "3", "sum": "5"})
	wantLocals(t, ps, map[string]string{"x": "2", "y": "2", "r": "4"})
	if cs.SessionID != c.SessionID || ps.SessionID != py.SessionID || cs.Frames[0].Name == ps.Frames[0].Name {
		t.Fatalf("snapshots mixed: %+v / %+v", cs.Frames[0], ps.Frames[0])
	}
	var list dap.SessionList
	d.ok("/api/debug/list-sessions", nil, &list)
	if len(list.Sessions) != 2 {
		t.Fatalf("list-sessions = %+v", list.Sessions)
	}
	// Left running on purpose: the bridge's shutdown must end both.
}

// Programs the attach tests run: each calls a function forever and writes
// its counter to the file "beat", so a test sees it make progress.
const (
	// beat.py: line 5 is `return sq` in work.
	dbgBeatPy = `import time

def work(n):
    sq = n * n
    return sq

i = 0
while True:
    work(i)
    with open("beat", "w") as f:
        f.write(str(i))
    i += 1
    time.sleep(0.05)
`
	// beat.go: line 11 is `return doubled` in tick.
	dbgBeatGo = `package main

import (
	"os"
	"strconv"
	"time"
)

func tick(n int) int {
	doubled := n * 2
	return doubled
}

func main() {
	for i := 0; ; i++ {
		tick(i)
		_ = os.WriteFile("beat", []byte(strconv.Itoa(i)), 0o644)
		time.Sleep(50 * time.Millisecond)
	}
}
`
)

// dbgAttachTarget is a program the test runs itself for a session to
// attach to.
type dbgAttachTarget struct {
	t      *testing.T
	cmd    *exec.Cmd
	root   string
	exited chan struct{}
	// owns tells the program's own helpers by command line, such as the
	// adapter debugpy.listen() daemonizes (out of the program's group).
	owns func(cmdline string) bool
}

// startAttachTarget runs cmd in root, in a process group of its own. It and
// the helpers owns names are killed at cleanup, before the workspace's
// leftover check.
func startAttachTarget(t *testing.T, root string, cmd *exec.Cmd, owns func(string) bool) *dbgAttachTarget {
	t.Helper()
	cmd.Dir = root
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{Setpgid: true}, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if owns == nil {
		owns = func(string) bool { return false }
	}
	p := &dbgAttachTarget{t: t, cmd: cmd, root: root, exited: make(chan struct{}), owns: owns}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			// A debugger still attached holds the dead process until it
			// lets go; the bridge's cleanup, which runs later, ends it.
			// Without this bound a failed test would hang the package.
			t.Errorf("attach target %d did not exit within 10s of SIGKILL (still traced by a debugger?)", cmd.Process.Pid)
		}
		for _, l := range dbgProcessesIn(root) {
			if pid, _ := strconv.Atoi(strings.Fields(l)[0]); pid > 0 && owns(l) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return p
}

// beat reads the program's counter (-1 before the first write).
func (p *dbgAttachTarget) beat() int {
	b, err := os.ReadFile(filepath.Join(p.root, "beat"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1 // caught mid-write
	}
	return n
}

// beatPast reports whether the counter is past n; the test fails if the
// program ended.
func (p *dbgAttachTarget) beatPast(n int) bool {
	p.t.Helper()
	select {
	case <-p.exited:
		p.t.Fatalf("the program ended (%v)", p.cmd.ProcessState)
	default:
	}
	return p.beat() > n
}

// checkDetached checks that the program runs on after the session ended:
// not traced, and still counting.
func (p *dbgAttachTarget) checkDetached() {
	p.t.Helper()
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if !strings.Contains(string(status), "TracerPid:\t0\n") {
		p.t.Fatalf("program still traced after detach:\n%s", status)
	}
	for range 2 { // twice: not merely one step on
		n := p.beat()
		testwait.Until(p.t, 10*time.Second, func() bool { return p.beatPast(n) }, "the program's counter past %d", n)
	}
}

// othersLeft lists the workspace's live processes that are not the
// program, its group or its own helpers.
func (p *dbgAttachTarget) othersLeft() []string {
	var left []string
	for _, l := range dbgProcessesIn(p.root) {
		pid, _ := strconv.Atoi(strings.Fields(l)[0])
		if pgid, err := syscall.Getpgid(pid); (err == nil && pgid == p.cmd.Process.Pid) || p.owns(l) {
			continue
		}
		left = append(left, l)
	}
	return left
}

// freePort picks a TCP port on 127.0.0.1 that is free now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dbgListening reports whether a TCP socket listens on port (IPv4).
func dbgListening(port int) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false
	}
	want := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			return true
		}
	}
	return false
}

// TestDebugAttachDebugpyByConnect attaches to a Python program listening
// with debugpy, breaks in the function it calls in a loop, and detaches
// leaving it running.
func TestDebugAttachDebugpyByConnect(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import debugpy").Run(); err != nil {
		t.Skipf("/usr/bin/python3 cannot import debugpy: %v", err)
	}
	d := startDebugWorkspace(t, map[string]string{"beat.py": dbgBeatPy}, nil)
	port := freePort(t)
	prog := startAttachTarget(t, d.root, exec.Command("/usr/bin/python3", "-m", "debugpy",
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--wait-for-client", "beat.py"),
		func(cmdline string) bool {
			// The adapter debugpy.listen() daemonizes, serving our port.
			return strings.Contains(cmdline, "debugpy/adapter --for-server") && strings.Contains(cmdline, fmt.Sprintf(" --port %d ", port))
		})
	// Wait for the listener without connecting: debugpy's adapter serves
	// one client, and a probe would be that client.
	testwait.Until(t, 20*time.Second, func() bool {
		select {
		case <-prog.exited:
			t.Fatalf("debugpy exited: %v", prog.cmd.ProcessState)
		default:
		}
		return dbgListening(port)
	}, "debugpy listening on %d", port)

	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "python", "request": "attach", "connect": map[string]any{"host": "127.0.0.1", "port": port},
	}, &start)
	if start.Adapter != "debugpy" {
		t.Fatalf("start = %+v, want debugpy", start)
	}
	var bps dap.SetBreakpointsResult
	d.ok("/api/debug/set-breakpoints", map[string]any{"session_id": start.SessionID, "path": "beat.py", "breakpoints": []map[string]any{{"line": 5}}}, &bps)
	if len(bps.Breakpoints) != 1 || !bps.Breakpoints[0].Verified {
		t.Fatalf("breakpoints = %+v, want one verified", bps.Breakpoints)
	}
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "wait_timeout_ms": 15000}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 || snap.Frames[0].Line != 5 || snap.Frames[0].Name != "work" {
		t.Fatalf("stop %+v at %+v, want breakpoint in work line 5", snap.Stop, snap.Frames)
	}
	n, err := strconv.Atoi(dbgLocal(t, snap.Locals, "n"))
	if err != nil {
		t.Fatalf("local n: %v", err)
	}
	if got := dbgLocal(t, snap.Locals, "sq"); got != strconv.Itoa(n*n) {
		t.Errorf("sq = %s with n = %d", got, n)
	}
	var stopped dap.StopResult
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, &stopped)
	if stopped.State != dap.StateEnded {
		t.Fatalf("stop-session = %+v", stopped)
	}
	prog.checkDetached()
	var left []string
	if !testwait.Within(5*time.Second, func() bool { left = prog.othersLeft(); return len(left) == 0 }) {
		t.Fatalf("processes left after stop-session: %q", left)
	}
}

// TestDebugAttachDelveByPid attaches delve to a running Go program, breaks
// in the function it calls in a loop, and detaches leaving it running.
func TestDebugAttachDelveByPid(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"go.mod": "module example.com/beat\n\ngo 1.22\n", "beat.go": dbgBeatGo}, nil)
	build := exec.Command("go", "build", "-gcflags=all=-N -l", "-o", "beatprog", ".")
	build.Dir = d.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prog := startAttachTarget(t, d.root, exec.Command(filepath.Join(d.root, "beatprog")), nil)
	testwait.Until(t, 10*time.Second, func() bool { return prog.beatPast(-1) }, "the program's first beat")

	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "go", "request": "attach", "pid": prog.cmd.Process.Pid,
		"breakpoints": []map[string]any{{"path": "beat.go", "breakpoints": []map[string]any{{"line": 11}}}},
	}, &start)
	if start.Adapter != "delve" || len(start.Breakpoints) != 1 || !start.Breakpoints[0].Verified {
		t.Fatalf("start = %+v", start)
	}
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "wait_timeout_ms": 15000}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 || snap.Frames[0].Line != 11 || !strings.HasSuffix(snap.Frames[0].Name, "tick") {
		t.Fatalf("stop %+v at %+v, want breakpoint in tick line 11", snap.Stop, snap.Frames)
	}
	n, err := strconv.Atoi(dbgLocal(t, snap.Locals, "n"))
	if err != nil {
		t.Fatalf("local n: %v", err)
	}
	if got := dbgLocal(t, snap.Locals, "doubled"); got != strconv.Itoa(2*n) {
		t.Errorf("doubled = %s with n = %d", got, n)
	}
	var stopped dap.StopResult
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, &stopped)
	if stopped.State != dap.StateEnded {
		t.Fatalf("stop-session = %+v", stopped)
	}
	prog.checkDetached()
	var left []string
	if !testwait.Within(5*time.Second, func() bool { left = prog.othersLeft(); return len(left) == 0 }) {
		t.Fatalf("processes left after stop-session: %q", left)
	}
}

// TestDebugLineContentBreakpoint: a breakpoint given by the text of its
// line binds at that line through broker and bridge, reports the line, and
// a text that names several lines is refused with their numbers.
func TestDebugLineContentBreakpoint(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"add_numbers.c": dbgAddNumbersC}, nil)
	d.build("add_numbers.c", "add_numbers")
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "c", "program": "add_numbers",
		"breakpoints": []map[string]any{{"path": "add_numbers.c", "breakpoints": []map[string]any{{"line_content": "return sum;"}}}},
	}, &start)
	if len(start.Breakpoints) != 1 || !start.Breakpoints[0].Verified || start.Breakpoints[0].Line != 4 {
		t.Fatalf("start breakpoints = %+v, want one verified at line 4", start.Breakpoints)
	}
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || snap.Frames[0].Line != 4 {
		t.Fatalf("stop %+v at %+v, want breakpoint at line 4", snap.Stop, snap.Frames)
	}
	wantLocals(t, snap, map[string]string{"sum": "5"})
	r := d.fails("/api/debug/set-breakpoints", map[string]any{"session_id": start.SessionID, "path": "add_numbers.c",
		"breakpoints": []map[string]any{{"line_content": "return"}}}, protocol.CodeInvalidPayload)
	if !strings.Contains(r.resp.Message, "lines 4, 11") {
		t.Errorf("ambiguous line_content: %q, want the candidate lines 4, 11", r.resp.Message)
	}
	r = d.fails("/api/debug/set-breakpoints", map[string]any{"session_id": start.SessionID, "path": "add_numbers.c",
		"breakpoints": []map[string]any{{"line": 4, "line_content": "return sum;"}}}, protocol.CodeInvalidPayload)
	if !strings.Contains(r.resp.Message, "breakpoints[0]") || !strings.Contains(r.resp.Message, "line_content") {
		t.Errorf("line and line_content: %q, want the field named", r.resp.Message)
	}
	var bps dap.SetBreakpointsResult
	d.ok("/api/debug/set-breakpoints", map[string]any{"session_id": start.SessionID, "path": "add_numbers.c",
		"breakpoints": []map[string]any{{"line_content": "return", "occurrence": 2}}}, &bps)
	if len(bps.Breakpoints) != 1 || bps.Breakpoints[0].Line != 11 {
		t.Fatalf("occurrence 2 of return = %+v, want line 11", bps.Breakpoints)
	}
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
}
