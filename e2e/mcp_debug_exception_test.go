//go:build !windows

package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// Issue 32, parts 1 and 5, through the MCP SDK client: an agent sees an
// exception's type and message in the stop, and a start that fails sees
// why (the compiler's lines), with nothing but the tools' text.
func TestMCPDebugExceptionInStopAndFailureWithItsReason(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{
		"div.py":        "def ratio(a, b):\n    return a / b\n\nprint(ratio(1, 0))\n",
		"goapp/go.mod":  "module example.com/goapp\n\ngo 1.22\n",
		"goapp/main.go": "package main\n\nfunc main() {\n\tx := 1 +\n}\n",
		"okapp/go.mod":  "module example.com/okapp\n\ngo 1.22\n",
		"okapp/main.go": "package main\n\nfunc main() {\n\tvar m map[string]int\n\tm[\"a\"] = 1\n}\n",
	}, nil)
	overMCP(t, d.b, d.ws, d.tok, func(t *testing.T, c *mcpClient) {
		var started dap.StartResult
		c.ok("debug_start", map[string]any{"language": "python", "program": "div.py"}, &started)
		var v struct {
			Snapshot *dap.Snapshot `json:"snapshot"`
		}
		text := c.ok("debug_continue", map[string]any{"session_id": started.SessionID}, &v)
		t.Logf("the exception's stop as the agent reads it:\n%s", text)
		for _, want := range []string{"Stopped (exception) in ratio at div.py:2", "\nException ZeroDivisionError: division by zero (uncaught)\n", "Thrown at:\n"} {
			if !strings.Contains(text, want) {
				t.Errorf("the stop's text lacks %q:\n%s", want, text)
			}
		}
		if v.Snapshot == nil || v.Snapshot.Stop == nil || v.Snapshot.Stop.Exception == nil || v.Snapshot.Stop.Exception.Type != "ZeroDivisionError" {
			t.Errorf("structured stop lacks the exception: %+v", v.Snapshot)
		}
		c.ok("debug_stop", map[string]any{"session_id": started.SessionID}, nil)

		// A Go module in a subdirectory, no cwd: it builds, runs, and its
		// panic is the stop.
		c.ok("debug_start", map[string]any{"language": "go", "program": "okapp", "timeout_s": 60}, &started)
		text = c.ok("debug_continue", map[string]any{"session_id": started.SessionID, "timeout_s": 60}, nil)
		if !strings.Contains(text, "Exception panic: assignment to entry in nil map") {
			t.Errorf("the panic's stop:\n%s", text)
		}
		c.ok("debug_stop", map[string]any{"session_id": started.SessionID}, nil)

		r := c.fails("debug_start", map[string]any{"language": "go", "program": "goapp", "timeout_s": 60}, protocol.CodeInvalidPayload)
		t.Logf("the failed start as the agent reads it:\n%s", r.Text)
		for _, want := range []string{"main.go:5:1: syntax error", "the Go program does not compile"} {
			if !strings.Contains(r.Text, want) {
				t.Errorf("the failed start lacks %q:\n%s", want, r.Text)
			}
		}

		var dc dap.DebugContext
		c.ok("debug_context", map[string]any{}, &dc)
		raw, _ := json.Marshal(dc.DebugAdapters)
		if !strings.Contains(string(raw), `"filter":"raised"`) {
			t.Errorf("debug_context lacks debugpy's filters: %s", raw)
		}
	})
}
