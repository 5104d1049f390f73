package e2e_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
)

// TestDebugWarmAdaptersThroughTheBridge: a bridge with warm adapters on
// (TETHER_WARM_ADAPTERS=true, the flag's default) keeps an lldb-dap ready
// after the first C session; the second start takes it and stops at the
// breakpoint as the first did; and when the bridge stops, the warm adapter
// ends with it (the workspace's cleanup checks that nothing is left).
func TestDebugWarmAdaptersThroughTheBridge(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"add_numbers.c": dbgAddNumbersC}, append(os.Environ(), "TETHER_WARM_ADAPTERS=true"))
	d.build("add_numbers.c", "add_numbers")
	lldbIn := func() []string {
		return slices.DeleteFunc(dbgProcessesIn(d.root), func(p string) bool { return !strings.Contains(p, "lldb-dap") })
	}
	run := func() {
		var start dap.StartResult
		d.ok("/api/debug/start-session", map[string]any{"language": "c", "program": "add_numbers",
			"breakpoints": []map[string]any{{"path": "add_numbers.c", "breakpoints": []map[string]any{{"line": 4}}}}}, &start)
		var snap dap.Snapshot
		d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "wait_timeout_ms": 15000}, &snap)
		if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 || snap.Frames[0].Line != 4 {
			t.Fatalf("snapshot stop %+v frames %+v, want the breakpoint at add_numbers.c:4", snap.Stop, snap.Frames)
		}
		wantLocals(t, snap, map[string]string{"a": "2", "b": "3", "sum": "5"})
		d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
	}
	run()
	// Made once the first session ended; the session's own adapter is
	// gone, so the one left in the root is the warm one.
	d.bridge.waitLine(30*time.Second, "warm debug adapter ready", `"adapter":"lldb-dap"`, `"made":1`)
	warm := lldbIn()
	if len(warm) != 1 {
		t.Fatalf("lldb-dap processes in the root with one warm: %q", warm)
	}
	run()
	// The second session took it: a new one replaces it once it ended.
	d.bridge.waitLine(30*time.Second, "warm debug adapter ready", `"adapter":"lldb-dap"`, `"made":2`)
	if l := lldbIn(); len(l) != 1 || l[0] == warm[0] {
		t.Fatalf("lldb-dap processes in the root after the second session: %q, want one other than the taken %q", l, warm[0])
	}
}
