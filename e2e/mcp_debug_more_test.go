package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/debugtest"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

// dbgCrashC is dap's crash.c: bump(1) is line 34, counter += by line 24,
// the NULL dereference in crash line 20.
var dbgCrashC = mustReadFile("../dap/testdata/crash.c")

// TestMCPDebugWatchpointRestartAndCore drives issue 32's restart,
// watchpoint and post-mortem tools through the MCP SDK client, reading
// only what the tools answer: a watchpoint stops where counter is
// written (on a machine that delivers hardware watchpoint traps:
// debugtest), debug_restart runs the program again to its breakpoint
// under the same session id, and a core made by gcore at the crash opens
// stopped in crash with the signal, refusing to step.
func TestMCPDebugWatchpointRestartAndCore(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"crash.c": dbgCrashC}, nil)
	overMCP(t, d.b, d.ws, d.tok, func(t *testing.T, c *mcpClient) {
		var built terminal.ExecResult
		c.ok("terminal_run", map[string]any{"command": "gcc -g -O0 -o crash crash.c"}, &built)
		if built.ExitCode != 0 {
			t.Fatalf("gcc: %+v", built)
		}
		var started dap.StartResult
		c.ok("debug_start", map[string]any{"language": "c", "program": "crash", "args": []string{"bump"},
			"breakpoints": []any{map[string]any{"path": "crash.c", "line_content": "bump(1);"}}}, &started)
		id := started.SessionID
		if text := c.ok("debug_continue", map[string]any{"session_id": id}, nil); !strings.Contains(text, "crash.c:34") {
			t.Fatalf("first stop, want crash.c:34:\n%s", text)
		}
		text := c.ok("debug_set_watchpoints", map[string]any{"session_id": id, "watchpoints": []any{map[string]any{"expression": "counter"}}}, nil)
		if !strings.Contains(text, "Watchpoint on counter (write) verified") {
			t.Fatalf("set watchpoints:\n%s", text)
		}
		if ok, why := debugtest.HardwareWatchpoints(); ok {
			text = c.ok("debug_continue", map[string]any{"session_id": id, "expressions": []string{"counter"}}, nil)
			if !strings.Contains(text, "in bump at crash.c:") || !strings.Contains(text, "counter = 1") {
				t.Fatalf("continue with a watchpoint, want a stop in bump with counter 1:\n%s", text)
			}
		} else {
			t.Logf("the watchpoint's stop is not checked: %s", why)
		}
		var restarted StopViewJSON
		text = c.ok("debug_restart", map[string]any{"session_id": id}, &restarted)
		if restarted.SessionID != id || !strings.Contains(text, "restarted") || !strings.Contains(text, "crash.c:34") {
			t.Fatalf("restart, want session %s stopped at crash.c:34 again:\n%s", id, text)
		}
		c.ok("debug_stop", map[string]any{"session_id": id}, nil)

		c.ok("terminal_run", map[string]any{"command": "gdb -batch -nx -ex run -ex 'gcore core.mcp' ./crash"}, &built)
		if _, err := os.Stat(filepath.Join(d.root, "core.mcp")); err != nil {
			t.Fatalf("gdb made no core: %+v", built)
		}
		text = c.ok("debug_start", map[string]any{"language": "c", "program": "crash", "core_file": "core.mcp"}, &started)
		if started.State != dap.StateStopped || !strings.Contains(text, "debug_snapshot") {
			t.Fatalf("start on a core, want stopped and pointing at debug_snapshot:\n%s", text)
		}
		text = c.ok("debug_snapshot", map[string]any{"session_id": started.SessionID}, nil)
		for _, want := range []string{"in crash at crash.c:20", "core was dumped on SIGSEGV", "depth = 7"} {
			if !strings.Contains(text, want) {
				t.Errorf("snapshot of the core lacks %q:\n%s", want, text)
			}
		}
		c.fails("debug_step", map[string]any{"session_id": started.SessionID}, protocol.CodeUnsupported)
		c.fails("debug_start", map[string]any{"language": "c", "program": "crash", "core_file": "core.none"}, protocol.CodeInvalidPayload)
		c.ok("debug_stop", map[string]any{"session_id": started.SessionID}, nil)
	})
}

// StopViewJSON is the part of a stop view's structured content this test reads.
type StopViewJSON struct {
	SessionID string `json:"session_id"`
	State     string `json:"state"`
}
