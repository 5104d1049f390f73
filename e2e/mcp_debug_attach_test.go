package e2e_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// TestMCPDebugAttachWithPathMappings: over MCP, debug_attach reaches a
// debugpy listening for a program whose sources live outside the
// workspace; the breakpoint given on the workspace's copy stops, and
// debug_continue shows the stop and its source from the workspace's file.
// A port nobody listens on is an error naming the argument.
func TestMCPDebugAttachWithPathMappings(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import debugpy").Run(); err != nil {
		t.Skipf("/usr/bin/python3 cannot import debugpy: %v", err)
	}
	d := startDebugWorkspace(t, map[string]string{"app/beat.py": dbgBeatPy}, nil)
	overMCP(t, d.b, d.ws, d.tok, func(t *testing.T, c *mcpClient) {
		remote := remoteDir(t, map[string]string{"beat.py": dbgBeatPy})
		port := freePort(t)
		prog := startAttachTarget(t, remote, exec.Command("/usr/bin/python3", "-m", "debugpy",
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--wait-for-client", "beat.py"),
			func(cmdline string) bool {
				return strings.Contains(cmdline, "debugpy/adapter --for-server") && strings.Contains(cmdline, fmt.Sprintf(" --port %d ", port))
			})
		waitListening(t, prog, port, "debugpy")

		var started dap.StartResult
		c.ok("debug_attach", map[string]any{"language": "python", "port": port,
			"path_mappings": []any{map[string]any{"local_root": "app", "remote_root": remote}},
			"breakpoints":   []any{map[string]any{"path": "app/beat.py", "line_content": "return sq"}}}, &started)
		if started.Adapter != "debugpy" || len(started.Breakpoints) != 1 || !started.Breakpoints[0].Verified {
			t.Fatalf("attach = %+v", started)
		}
		text := c.ok("debug_continue", map[string]any{"session_id": started.SessionID}, nil)
		for _, want := range []string{"in work at app/beat.py:5", "Source app/beat.py:", "→     5      return sq"} {
			if !strings.Contains(text, want) {
				t.Errorf("continue text lacks %q:\n%s", want, text)
			}
		}
		c.ok("debug_stop", map[string]any{"session_id": started.SessionID}, nil)
		prog.checkDetached()

		r := c.fails("debug_attach", map[string]any{"language": "go", "port": freePort(t)}, protocol.CodeInvalidPayload)
		if !strings.Contains(r.Text, "connect") {
			t.Errorf("refused attach %q does not name connect", r.Text)
		}
	})
}
