package e2e_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/terminal"
)

func TestMCPToolsListedWithValidSchemasAndUnknownArgumentsRefused(t *testing.T) {
	w := startMCPWorkspace(t, nil)
	overMCP(t, w.b, w.ws, w.tok, func(t *testing.T, c *mcpClient) {
		tl := c.list()
		// The tools this workspace's routes serve (26 of the 30 in
		// mcp/tools_*.go here: no sandbox, no git_commit or git_push), and
		// no unbounded growth: an agent reads each description.
		if n := len(tl.Tools); n < 20 || n > 40 {
			t.Errorf("%d tools listed, want 20 to 40: %v", n, tl.names())
		}
		if len(tl.SchemaErrors) > 0 {
			t.Errorf("schemas that are not valid JSON Schema: %v", tl.SchemaErrors)
		}
		for _, tool := range tl.Tools {
			var s struct {
				Type                 string `json:"type"`
				AdditionalProperties *bool  `json:"additionalProperties"`
			}
			if err := json.Unmarshal(tool.InputSchema, &s); err != nil || s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties {
				t.Errorf("%s: input schema %s: want an object refusing other properties", tool.Name, tool.InputSchema)
			}
		}
		marker := filepath.Join(w.root, "ran-"+t.Name()[len(t.Name())-4:])
		r := c.call("terminal_run", map[string]any{"command": "touch " + marker, "timeot_s": 5})
		if !r.IsError || !strings.Contains(r.Text, "timeot_s") {
			t.Fatalf("unknown argument: err=%q isError=%v %q", r.Err, r.IsError, r.Text)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the command ran although its arguments were refused")
		}
		if r := c.call("debug_step", map[string]any{"session_id": "s", "kind": "sideways"}); !r.IsError {
			t.Fatalf("a value outside the enum was not refused: %+v", r)
		}
	})
}

// TestMCPDebugCScenarioInFiveToolCalls is the headline over MCP: compile
// with terminal_run, then start with a breakpoint by the line's text,
// continue (it waits and shows the stop with its locals), step out, stop,
// and no process is left.
func TestMCPDebugCScenarioInFiveToolCalls(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"add_numbers.c": dbgAddNumbersC}, nil)
	overMCP(t, d.b, d.ws, d.tok, func(t *testing.T, c *mcpClient) {
		var built terminal.ExecResult
		c.ok("terminal_run", map[string]any{"command": "gcc -g -O0 -o add_numbers add_numbers.c"}, &built)
		if built.ExitCode != 0 {
			t.Fatalf("gcc: %+v", built)
		}
		calls := 0
		call := func(name string, args any, out any) string {
			t.Helper()
			calls++
			return c.ok(name, args, out)
		}
		var started dap.StartResult
		call("debug_start", map[string]any{"language": "c", "program": "add_numbers",
			"breakpoints": []any{map[string]any{"path": "add_numbers.c", "line_content": "return sum;"}}}, &started)
		if len(started.Breakpoints) != 1 || started.Breakpoints[0].Line != 4 {
			t.Fatalf("breakpoints %+v, want one at line 4", started.Breakpoints)
		}
		text := call("debug_continue", map[string]any{"session_id": started.SessionID}, nil)
		for _, want := range []string{"a = 2", "b = 3", "sum = 5", "in add_numbers at add_numbers.c:4", "breakpoint",
			"→     4      return sum;", "      1  #include <stdio.h>", "      7  int main(void) {"} {
			if !strings.Contains(text, want) {
				t.Errorf("continue text lacks %q:\n%s", want, text)
			}
		}
		text = call("debug_step", map[string]any{"session_id": started.SessionID, "kind": "out"}, nil)
		if !strings.Contains(text, "main") || !strings.Contains(text, "add_numbers.c:8") {
			t.Errorf("step out text, want main at line 8:\n%s", text)
		}
		var stopped dap.StopResult
		call("debug_stop", map[string]any{"session_id": started.SessionID}, &stopped)
		if stopped.State != dap.StateEnded {
			t.Errorf("stop: %+v", stopped)
		}
		if calls > 5 {
			t.Errorf("%d tool calls after compiling, want at most 5", calls)
		}
		for _, p := range dbgProcessesIn(d.root) {
			if !strings.Contains(p, "bash") { // the bridge's visible terminal
				t.Errorf("process left after debug_stop: %q", p)
			}
		}
	})
}

// TestMCPDebugRunToStopsThereAndLeavesNoBreakpoint: debug_run_to stops at
// the line in a program that passes it forever, and the temporary
// breakpoint is gone afterwards (the next continue runs on).
func TestMCPDebugRunToStopsThereAndLeavesNoBreakpoint(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"loop.c": dbgLoopC}, nil)
	overMCP(t, d.b, d.ws, d.tok, func(t *testing.T, c *mcpClient) {
		c.ok("terminal_run", map[string]any{"command": "gcc -g -O0 -o loop loop.c"}, nil)
		var started dap.StartResult
		c.ok("debug_start", map[string]any{"language": "c", "program": "loop"}, &started)
		text := c.ok("debug_run_to", map[string]any{"session_id": started.SessionID, "path": "loop.c", "line": 5}, nil)
		if !strings.Contains(text, "in tick at loop.c:5") || !strings.Contains(text, "doubled = ") {
			t.Fatalf("run to line 5:\n%s", text)
		}
		text = c.ok("debug_continue", map[string]any{"session_id": started.SessionID, "timeout_s": 1.5}, nil)
		if !strings.Contains(text, "is running") {
			t.Fatalf("continue after run-to stopped again (the temporary breakpoint was left):\n%s", text)
		}
		if text = c.ok("debug_pause", map[string]any{"session_id": started.SessionID}, nil); !strings.Contains(text, "Stopped") {
			t.Errorf("pause:\n%s", text)
		}
		c.ok("debug_stop", map[string]any{"session_id": started.SessionID}, nil)
	})
}

func TestMCPDebugPythonSession(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"calc.py": dbgCalcPy}, nil)
	overMCP(t, d.b, d.ws, d.tok, func(t *testing.T, c *mcpClient) {
		var started dap.StartResult
		c.ok("debug_start", map[string]any{"language": "python", "program": "calc.py",
			"breakpoints": []any{map[string]any{"path": "calc.py", "line": 5, "condition": "x == 3"}}}, &started)
		var v struct {
			Snapshot *dap.Snapshot `json:"snapshot"`
		}
		text := c.ok("debug_continue", map[string]any{"session_id": started.SessionID, "expressions": []string{"x * y"}}, &v)
		for _, want := range []string{"in mul at calc.py:5", "x = 3", "y = 2", "r = 6", "x * y = 6",
			"Source calc.py:", "→     5      return r", "      2  ", "      8      total = 0"} {
			if !strings.Contains(text, want) {
				t.Errorf("continue text lacks %q:\n%s", want, text)
			}
		}
		if v.Snapshot == nil || len(v.Snapshot.Frames) == 0 || v.Snapshot.Frames[0].Name != "mul" {
			t.Errorf("structured snapshot %+v", v.Snapshot)
		}
		text = c.ok("debug_evaluate", map[string]any{"session_id": started.SessionID, "expression": "x + y"}, nil)
		if !strings.Contains(text, "x + y = 5") {
			t.Errorf("evaluate: %q", text)
		}
		// The uncaught exception is the next stop.
		text = c.ok("debug_continue", map[string]any{"session_id": started.SessionID}, nil)
		if !strings.Contains(text, "exception") || !strings.Contains(text, "total = 20") {
			t.Errorf("second continue:\n%s", text)
		}
		c.ok("debug_stop", map[string]any{"session_id": started.SessionID}, nil)
		if text := c.ok("debug_snapshot", map[string]any{"session_id": started.SessionID}, nil); !strings.Contains(text, "has ended") {
			t.Errorf("snapshot of a stopped session: %q", text)
		}
		c.fails("debug_evaluate", map[string]any{"session_id": started.SessionID, "expression": "1"}, protocol.CodeSessionEnded)
	})
}

func TestMCPDebugNodeSession(t *testing.T) {
	nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"calc.js": nodeCalcJS}, nil)
	overMCP(t, d.b, d.ws, d.tok, func(t *testing.T, c *mcpClient) {
		var started dap.StartResult
		c.ok("debug_start", map[string]any{"language": "javascript", "program": "calc.js",
			"breakpoints": []any{map[string]any{"path": "calc.js", "line_content": "return r;"}}}, &started)
		if len(started.Breakpoints) != 1 || started.Breakpoints[0].Line != 6 {
			t.Fatalf("breakpoints %+v, want one at line 6", started.Breakpoints)
		}
		text := c.ok("debug_continue", map[string]any{"session_id": started.SessionID}, nil)
		for _, want := range []string{"in mul at calc.js:6", "p = 0", "q = 2", "r = 10", "→     6    return r;"} {
			if !strings.Contains(text, want) {
				t.Errorf("continue text lacks %q:\n%s", want, text)
			}
		}
		text = c.ok("debug_step", map[string]any{"session_id": started.SessionID, "kind": "out"}, nil)
		if !strings.Contains(text, "calc.js:13") {
			t.Errorf("step out, want the loop at line 13:\n%s", text)
		}
		r := c.fails("debug_set_breakpoints", map[string]any{"session_id": started.SessionID, "path": "calc.js",
			"breakpoints": []any{map[string]any{"line": 9, "line_content": "return a + b;"}}}, protocol.CodeInvalidPayload)
		if !strings.Contains(r.Text, "not both") {
			t.Errorf("both line and line_content: %q", r.Text)
		}
		c.ok("debug_stop", map[string]any{"session_id": started.SessionID}, nil)
	})
}

func TestMCPDebugGoSessionWithDelve(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"go.mod": "module example.com/adder\n\ngo 1.22\n", "main.go": dbgMainGo}, nil)
	overMCP(t, d.b, d.ws, d.tok, func(t *testing.T, c *mcpClient) {
		var started dap.StartResult
		c.ok("debug_start", map[string]any{"language": "go", "program": ".", "timeout_s": 50,
			"breakpoints": []any{map[string]any{"path": "main.go", "line": 6}}}, &started)
		text := c.ok("debug_continue", map[string]any{"session_id": started.SessionID, "timeout_s": 50}, nil)
		for _, want := range []string{"main.go:6", "a = 4", "b = 5"} {
			if !strings.Contains(text, want) {
				t.Errorf("continue text lacks %q:\n%s", want, text)
			}
		}
		text = c.ok("debug_continue", map[string]any{"session_id": started.SessionID}, nil)
		if !strings.Contains(text, "has ended (exit code 0)") {
			t.Errorf("run to the end:\n%s", text)
		}
		c.ok("debug_stop", map[string]any{"session_id": started.SessionID}, nil)
	})
}

const mcpHelloC = `#include <stdio.h>
int main(void) {
    printf("hello\n");
    return 0;
}
`

func TestMCPFilesOnTheBridgeRoot(t *testing.T) {
	w := startMCPWorkspace(t, map[string]string{"hello-stdio.c": mcpHelloC, "hello-http.c": mcpHelloC})
	git(t, w.root, "init", "-q", "-b", "main")
	git(t, w.root, "add", "-A")
	git(t, w.root, "commit", "-qm", "hello")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(w.root, "out")); err != nil {
		t.Fatal(err)
	}
	overMCP(t, w.b, w.ws, w.tok, func(t *testing.T, c *mcpClient) {
		transport := filepath.Base(t.Name())
		file, word := "hello-"+transport+".c", "tether-"+transport
		text := c.ok("file_read", map[string]any{"path": file}, nil)
		if !strings.Contains(text, "     3\t    printf") {
			t.Errorf("file_read text, want numbered lines:\n%s", text)
		}
		c.ok("file_str_replace", map[string]any{"path": file, "old": `printf("hello\n");`, "new": `printf("hello ` + word + `\n");`}, nil)
		text = c.ok("file_search", map[string]any{"pattern": word, "fixed": true}, nil)
		if !strings.Contains(text, file+":3: ") {
			t.Errorf("search after the edit:\n%s", text)
		}
		text = c.ok("git_diff", map[string]any{"path": file}, nil)
		if !strings.Contains(text, `+    printf("hello `+word) {
			t.Errorf("git diff lacks the edit:\n%s", text)
		}
		c.fails("file_read", map[string]any{"path": "../" + filepath.Base(outside) + "/secret"}, protocol.CodeInvalidPath)
		r := c.fails("file_read", map[string]any{"path": "out/secret"}, protocol.CodeInvalidPath)
		if strings.Contains(r.Text, "s3cret") {
			t.Fatalf("the symlink's target leaked: %q", r.Text)
		}
	})
}

func TestMCPReadOnlyBridgeRefusesWritesAndListsNone(t *testing.T) {
	w := startMCPWorkspace(t, map[string]string{"hello.c": mcpHelloC}, "--read-only")
	overMCP(t, w.b, w.ws, w.tok, func(t *testing.T, c *mcpClient) {
		names := c.list().names()
		for _, hidden := range []string{"file_write", "file_str_replace", "terminal_run"} {
			if slices.Contains(names, hidden) {
				t.Errorf("%s listed on a read-only bridge", hidden)
			}
		}
		if !slices.Contains(names, "file_read") {
			t.Errorf("file_read not listed: %v", names)
		}
		// A client may call a tool it was not shown: the bridge refuses.
		c.fails("file_write", map[string]any{"path": "new.txt", "content": "x"}, protocol.CodeForbidden)
		if _, err := os.Stat(filepath.Join(w.root, "new.txt")); err == nil {
			t.Fatal("a read-only bridge wrote the file")
		}
	})
}

func TestMCPSandboxAcquireEditCommitPush(t *testing.T) {
	origin := sandboxOrigin(t)
	w := startMCPWorkspace(t, nil, "--sandbox-dir", t.TempDir())
	overMCP(t, w.b, w.ws, w.tok, func(t *testing.T, c *mcpClient) {
		key := "conv-" + t.Name()[len(t.Name())-4:]
		var acq sandbox.AcquireResult
		text := c.ok("sandbox_acquire", map[string]any{"repo": origin, "mode": "edit", "key": key}, &acq)
		if acq.WorkspaceID == "" || acq.Branch != "agent/edits-"+key || !strings.Contains(text, acq.WorkspaceID) {
			t.Fatalf("acquire %+v: %q", acq, text)
		}
		id := acq.WorkspaceID
		c.ok("file_str_replace", map[string]any{"sandbox_id": id, "path": "main.go", "old": "Answer = 42", "new": "Answer = 43"}, nil)
		text = c.ok("file_read", map[string]any{"sandbox_id": id, "path": "main.go"}, nil)
		if !strings.Contains(text, "Answer = 43") {
			t.Fatalf("read after edit: %q", text)
		}
		text = c.ok("terminal_run", map[string]any{"sandbox_id": id, "command": "grep -n Answer main.go"}, nil)
		if !strings.Contains(text, "3:const Answer = 43") {
			t.Errorf("command in the sandbox: %q", text)
		}
		text = c.ok("git_diff", map[string]any{"sandbox_id": id}, nil)
		if !strings.Contains(text, "+const Answer = 43") {
			t.Errorf("diff: %q", text)
		}
		var commit sandbox.GitCommit
		c.ok("git_commit", map[string]any{"sandbox_id": id, "message": "answer 43"}, &commit)
		if !commit.Committed || commit.Commit == "" {
			t.Fatalf("commit %+v", commit)
		}
		c.ok("git_push", map[string]any{"sandbox_id": id}, nil)
		pushed := git(t, origin, "log", "-1", "--format=%H %s", acq.Branch)
		if !strings.HasPrefix(pushed, commit.Commit) || !strings.Contains(pushed, "answer 43") {
			t.Errorf("origin's %s is %q, want %s", acq.Branch, pushed, commit.Commit)
		}
		c.ok("sandbox_release", map[string]any{"sandbox_id": id}, nil)
	})
}

func TestMCPOfflineWorkspaceAnswersWorkspaceOfflineUnder1s(t *testing.T) {
	b := startBroker(t)
	ws := "ws-nobody"
	overMCP(t, b, ws, token(t, auth.RoleCaller, ws), func(t *testing.T, c *mcpClient) {
		r := c.fails("terminal_run", map[string]any{"command": "true"}, protocol.CodeWorkspaceOffline)
		within(t, "workspace_offline", r.Elapsed, time.Second)
		if !strings.Contains(r.Text, "Next:") {
			t.Errorf("no next step: %q", r.Text)
		}
	})
}

func TestMCPBridgeKilledDuringALongCommandAnswersDisconnectedUnder1s(t *testing.T) {
	for _, name := range []string{"stdio", "http"} {
		t.Run(name, func(t *testing.T) {
			e := startTermBridge(t)
			c := connectMCP(t, mcpTransports(e.b, e.ws, e.tok)[name]...)
			id := c.start("terminal_run", map[string]any{"command": "sleep 30.25", "timeout_s": 60}, false)
			testwait.Until(t, 5*time.Second, func() bool { return len(e.running("sleep 30.25")) > 0 }, "the command to start")
			killed := time.Now()
			_ = syscall.Kill(e.bridge.cmd.Process.Pid, syscall.SIGKILL)
			r := c.wait(id, 10*time.Second)
			if !r.IsError || !strings.Contains(r.Text, protocol.CodeWorkspaceDisconnected) {
				t.Fatalf("got err=%q isError=%v %q", r.Err, r.IsError, r.Text)
			}
			within(t, "workspace_disconnected after the kill", time.Since(killed), time.Second)
			// The bridge's reaper ends what it started.
			testwait.Until(t, 2*time.Second, func() bool { return len(e.tagged()) == 0 }, "the killed bridge's commands to end")
		})
	}
}

func TestMCPClientCancelStopsTheCommandOnTheBridge(t *testing.T) {
	e := startTermBridge(t)
	for i, name := range []string{"stdio", "http"} {
		t.Run(name, func(t *testing.T) {
			c := connectMCP(t, mcpTransports(e.b, e.ws, e.tok)[name]...)
			command := []string{"sleep 40.5", "sleep 40.75"}[i]
			id := c.start("terminal_run", map[string]any{"command": command, "timeout_s": 60}, false)
			testwait.Until(t, 5*time.Second, func() bool { return len(e.running(command)) > 0 }, "the command to start")
			c.cancel(id)
			if r := c.wait(id, 5*time.Second); r.Err == "" {
				t.Errorf("the cancelled call answered %+v", r)
			}
			testwait.Until(t, 3*time.Second, func() bool { return len(e.running(command)) == 0 }, "the command to end")
			// The workspace still serves the next call.
			c.ok("terminal_run", map[string]any{"command": "true"}, nil)
		})
	}
}

func TestMCPLongCommandSendsProgress(t *testing.T) {
	w := startMCPWorkspace(t, nil)
	overMCP(t, w.b, w.ws, w.tok, func(t *testing.T, c *mcpClient) {
		id := c.start("terminal_run", map[string]any{"command": "sleep 2.5; echo done"}, true)
		if r := c.wait(id, 30*time.Second); r.IsError || r.Err != "" || !strings.Contains(r.Text, "done") {
			t.Fatalf("%+v", r)
		}
		p := c.progressOf(id)
		if len(p) < 2 || p[0].Total != 30 || p[1].Progress <= p[0].Progress || !strings.Contains(p[0].Message, "sleep 2.5") {
			t.Fatalf("progress %+v, want two or more, rising, with the command", p)
		}
	})
}

func TestMCPBadTokensRefused(t *testing.T) {
	b := startBroker(t)
	for name, tok := range map[string]string{"invalid": "not-a-token", "other workspace": token(t, auth.RoleCaller, "ws-other")} {
		start := time.Now()
		out, err := exec.Command(tetherBin, "mcp", "--broker", b.url, "--workspace", "ws-mine", "--token", tok).CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "refused") {
			t.Errorf("stdio, %s token: %v %s", name, err, out)
		}
		within(t, "tether mcp refusing a "+name+" token", time.Since(start), 5*time.Second)

		_, ev := startMCPClient(t, "--url", b.url+"/api/v1/workspaces/ws-mine/mcp", "--token", tok)
		if ev["event"] != "connect_error" {
			t.Errorf("http, %s token: %v", name, ev)
		}
	}
}

// TestMCPStdioLeavesItsPipesAsItFoundThem: tether mcp on pipes reads and
// writes them non-blocking while it serves (through Go's poller, see
// cmd/tether/mcp_stdio_unix.go), and leaves each pipe in the mode it found it in
// when it exits: a blocking pipe blocking, a non-blocking one non-blocking.
func TestMCPStdioLeavesItsPipesAsItFoundThem(t *testing.T) {
	b := startBroker(t)
	tok := token(t, auth.RoleCaller, "ws-pipes")
	nonblock := func(fd int) bool {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		return flags&unix.O_NONBLOCK != 0
	}
	for _, startNonblocking := range []bool{false, true} {
		var in, out [2]int // in: the child's stdin (read end, ours to write); out: its stdout
		if err := pipeCloexec(in[:]); err != nil {
			t.Fatal(err)
		}
		if err := pipeCloexec(out[:]); err != nil {
			t.Fatal(err)
		}
		for _, fd := range []int{in[0], in[1], out[0], out[1]} {
			if err := syscall.SetNonblock(fd, startNonblocking); err != nil {
				t.Fatal(err)
			}
		}
		// The child's ends stay open here too: their mode is the pipes'.
		childIn, childOut := os.NewFile(uintptr(in[0]), "child-stdin"), os.NewFile(uintptr(out[1]), "child-stdout")
		feed, answers := os.NewFile(uintptr(in[1]), "feed"), os.NewFile(uintptr(out[0]), "answers")
		cmd := exec.Command(tetherBin, "mcp", "--broker", b.url, "--workspace", "ws-pipes", "--token", tok)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = childIn, childOut, os.Stderr
		cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{}, syscall.SIGKILL)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if _, err := feed.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipes","version":"1"}}}` + "\n"); err != nil {
			t.Fatal(err)
		}
		line := make(chan string, 1)
		go func() {
			l, _ := bufio.NewReader(answers).ReadString('\n')
			line <- l
		}()
		select {
		case l := <-line:
			if !strings.Contains(l, `"id":1`) || !strings.Contains(l, "serverInfo") {
				t.Fatalf("initialize answered %q", l)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("tether mcp did not answer initialize")
		}
		if !nonblock(in[0]) || !nonblock(out[1]) {
			t.Fatalf("started %s: tether mcp serves its pipes blocking", map[bool]string{false: "blocking", true: "non-blocking"}[startNonblocking])
		}
		_ = feed.Close() // EOF on its stdin ends it
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("tether mcp at EOF: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatal("tether mcp did not exit at EOF on its stdin")
		}
		if nonblock(in[0]) != startNonblocking || nonblock(out[1]) != startNonblocking {
			t.Fatalf("started %v non-blocking, left stdin %v, stdout %v", startNonblocking, nonblock(in[0]), nonblock(out[1]))
		}
		for _, f := range []*os.File{childIn, childOut, answers} {
			_ = f.Close()
		}
	}
}

func TestUpPrintsMCPCommandsThatWork(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command(tetherBin, "up", "--listen", "127.0.0.1:0", "--root", root, "--sandbox-dir", "")
	printed := &syncBuffer{}
	cmd.Stdout = printed
	start(t, "up", cmd)
	// Its instructions end with this line; what is missing if it never
	// comes is reported below.
	testwait.Within(15*time.Second, func() bool { return printed.has("Ctrl-C stops it") })
	buf := printed.String()
	var lines []string
	for _, l := range strings.Split(buf, "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	var stdio, http []string
	var cursor []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "claude mcp add --transport stdio tether -- "):
			stdio = strings.Fields(strings.TrimPrefix(l, "claude mcp add --transport stdio tether -- "))
		case strings.HasPrefix(l, "claude mcp add --transport http tether "):
			f := strings.Fields(l) // claude mcp add --transport http tether URL --header "Authorization: Bearer TOKEN"
			http = []string{"--url", f[6], "--token", strings.TrimSuffix(f[len(f)-1], `"`)}
		case strings.HasPrefix(l, `{"mcpServers"`):
			cursor = append(cursor, l)
		}
	}
	if stdio == nil || http == nil || len(cursor) != 2 {
		t.Fatalf("tether up printed no MCP setup:\n%s", buf)
	}
	var file struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(cursor[0]), &file); err != nil || file.MCPServers["tether"].Type != "stdio" {
		t.Fatalf("stdio mcp.json %q: %v", cursor[0], err)
	}
	fromFile := append([]string{file.MCPServers["tether"].Command}, file.MCPServers["tether"].Args...)
	if !slices.Equal(fromFile, stdio) {
		t.Errorf("mcp.json runs %v, claude mcp add runs %v", fromFile, stdio)
	}
	for name, args := range map[string][]string{"stdio": {"--stdio", mustJSON(stdio)}, "http": http} {
		c := connectMCP(t, args...)
		if n := len(c.list().Tools); n < 20 {
			t.Errorf("%s: %d tools", name, n)
		}
		if text := c.ok("terminal_run", map[string]any{"command": "echo via-" + name}, nil); !strings.Contains(text, "via-"+name) {
			t.Errorf("%s: %q", name, text)
		}
	}
}
