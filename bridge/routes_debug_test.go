//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
)

func debugCall(t *testing.T, b *bridge.Bridge, endpoint string, payload any) protocol.ToolResponse {
	t.Helper()
	return b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "c", Endpoint: endpoint, Payload: mustJSON(t, payload), Timeout: 30})
}

func TestDebugRoutesAreMountedAndCodedErrorsPassThrough(t *testing.T) {
	b := startBridge(t, bridge.Config{}, nil)
	for _, p := range []string{protocol.DebugContextEndpoint, protocol.DebugStartEndpoint, protocol.DebugBreakpointsEndpoint,
		protocol.DebugContinueEndpoint, protocol.DebugStepOverEndpoint, protocol.DebugStepIntoEndpoint, protocol.DebugStepOutEndpoint,
		protocol.DebugPauseEndpoint, protocol.DebugSnapshotEndpoint, protocol.DebugEvaluateEndpoint, protocol.DebugListEndpoint,
		protocol.DebugStopEndpoint, protocol.DebugOutputEndpoint, protocol.DebugRestartEndpoint, protocol.DebugWatchpointsEndpoint} {
		if !slices.Contains(b.Router().Routes(), p) {
			t.Errorf("route %s is not mounted", p)
		}
	}
	wantSuccess(t, debugCall(t, b, protocol.DebugListEndpoint, nil), `{"sessions":[]}`)
	wantFailure(t, debugCall(t, b, protocol.DebugSnapshotEndpoint, map[string]any{"session_id": "dbg-missing"}), protocol.CodeSessionNotFound)
	wantFailure(t, debugCall(t, b, protocol.DebugStepOverEndpoint, map[string]any{"session_id": "dbg-missing"}), protocol.CodeSessionNotFound)
	wantFailure(t, debugCall(t, b, protocol.DebugRestartEndpoint, map[string]any{"session_id": "dbg-missing"}), protocol.CodeSessionNotFound)
	wantFailure(t, debugCall(t, b, protocol.DebugWatchpointsEndpoint, map[string]any{"session_id": "dbg-missing", "watchpoints": []any{}}), protocol.CodeSessionNotFound)
	wantFailure(t, debugCall(t, b, protocol.DebugWatchpointsEndpoint, map[string]any{"session_id": "dbg-missing", "watchpoint": "x"}), protocol.CodeInvalidPayload)
	wantFailure(t, debugCall(t, b, protocol.DebugStartEndpoint, map[string]any{}), protocol.CodeInvalidPayload)
	wantFailure(t, debugCall(t, b, protocol.DebugStartEndpoint, map[string]any{"language": "cobol", "program": "x"}), protocol.CodeDebugAdapterUnavailable)
	wantFailure(t, debugCall(t, b, protocol.DebugStartEndpoint, map[string]any{"args": "not a list"}), protocol.CodeInvalidPayload)
}

// TestDebugSessionsEndWithRun: a session still stopped when Run ends has
// its adapter and debuggee killed.
func TestDebugSessionsEndWithRun(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed")
	}
	root := t.TempDir()
	src := "int main(void) { return 0; }\n"
	if err := os.WriteFile(filepath.Join(root, "p.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := exec.Command("gcc", "-g", "-o", "p", "p.c")
	cc.Dir = root
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	b, err := bridge.New(bridge.Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() { cancel(); <-done }()

	resp := debugCall(t, b, protocol.DebugStartEndpoint, map[string]any{"language": "c", "program": "p", "stop_on_entry": true})
	if resp.Error == protocol.CodeDebugAdapterUnavailable {
		t.Skipf("lldb-dap unavailable: %s", resp.Message)
	}
	var start struct {
		State string `json:"state"`
	}
	if !resp.Success || json.Unmarshal(resp.Result, &start) != nil || start.State != "stopped" {
		t.Fatalf("start-session = %+v", resp)
	}
	debuggee := filepath.Join(root, "p")
	if pids := pidsOf(debuggee); len(pids) != 1 {
		t.Fatalf("debuggee processes %v, want 1", pids)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("Run did not return")
	}
	done <- nil // for the deferred receive
	if pids := pidsOf(debuggee); len(pids) != 0 {
		t.Fatalf("debuggee %v outlived Run", pids)
	}
}

// pidsOf lists live processes running exe.
func pidsOf(exe string) []string {
	var out []string
	links, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && target == exe {
			dir := filepath.Dir(l)
			if stat, err := os.ReadFile(dir + "/stat"); err == nil {
				if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat)[i+2:], "Z") {
					continue
				}
			}
			out = append(out, filepath.Base(dir))
		}
	}
	return out
}
