//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

func TestTerminalRoutesAreMounted(t *testing.T) {
	b, err := bridge.New(bridge.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	routes := b.Router().Routes()
	for _, r := range []string{
		"/api/terminal/execute",
		"/api/terminal/sessions",
		"/api/terminal/sessions/:session_id/output",
		"/api/terminal/sessions/:session_id/input",
		"/api/terminal/sessions/:session_id/signal",
	} {
		if !slices.Contains(routes, r) {
			t.Errorf("route %s is not mounted (routes: %v)", r, routes)
		}
	}
}

func dispatchTerminal(t *testing.T, b *bridge.Bridge, endpoint string, payload any, timeout float64) protocol.ToolResponse {
	t.Helper()
	return b.Dispatch(context.Background(), protocol.ToolCall{
		CorrelationID: "c-" + endpoint, Endpoint: endpoint, Payload: mustJSON(t, payload), Timeout: timeout,
	})
}

func TestSyncExecuteWithoutTimeoutAnswersTimedOutBeforeTheCallDeadline(t *testing.T) {
	b := startBridge(t, bridge.Config{Terminal: terminal.Config{KillGrace: 200 * time.Millisecond}}, nil)
	for _, hidden := range []bool{true, false} {
		start := time.Now()
		resp := dispatchTerminal(t, b, protocol.TerminalExecuteEndpoint, map[string]any{"command": "echo started; sleep 30", "hidden": hidden}, 1)
		took := time.Since(start)
		if !resp.Success {
			t.Fatalf("hidden=%v: %+v, want the command's timed_out result", hidden, resp)
		}
		var r terminal.ExecResult
		if err := json.Unmarshal(resp.Result, &r); err != nil {
			t.Fatal(err)
		}
		if !r.TimedOut || !strings.HasPrefix(r.Output, "started\n") || took > time.Second {
			t.Errorf("hidden=%v: %+v after %v", hidden, r, took)
		}
	}
}

func TestRunEndKillsTheTerminalsCommands(t *testing.T) {
	b, err := bridge.New(bridge.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer cancel()

	resp := dispatchTerminal(t, b, protocol.TerminalExecuteEndpoint, map[string]any{"command": "sleep 100", "mode": "async", "hidden": true}, 5)
	if !resp.Success {
		t.Fatal(resp)
	}
	resp = dispatchTerminal(t, b, protocol.TerminalSessionsEndpoint, nil, 5)
	var list bridge.SessionsResult
	if err := json.Unmarshal(resp.Result, &list); err != nil || len(list.Sessions) != 1 || list.Sessions[0].PID == 0 {
		t.Fatalf("sessions %s (%v)", resp.Result, err)
	}
	pid := list.Sessions[0].PID

	cancel()
	if err := recv(t, done, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the command's process %d outlived Run (kill 0: %v)", pid, err)
	}
	resp = dispatchTerminal(t, b, protocol.TerminalExecuteEndpoint, map[string]any{"command": "true"}, 5)
	if resp.Success {
		t.Errorf("a command ran after Run ended: %+v", resp)
	}
}

func TestAttachIsServedToLoopbackOnly(t *testing.T) {
	b, err := bridge.New(bridge.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h := b.HTTPHandler()
	for _, tc := range []struct{ name, remote, host string }{
		{"remote client", "192.0.2.7:40000", "127.0.0.1:8765"},
		{"foreign host name", "127.0.0.1:40000", "attacker.example:8765"},
		{"public host address", "127.0.0.1:40000", "192.0.2.1:8765"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://"+tc.host+bridge.AttachPath, nil)
			req.RemoteAddr, req.Host = tc.remote, tc.host
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusForbidden {
				t.Errorf("HTTP %d, want 403", rec.Code)
			}
		})
	}
}
