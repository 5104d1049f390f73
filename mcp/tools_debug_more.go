package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// The restart and watchpoint tools (issue 32), beside the other debug
// tools of tools_debug.go.

type restartArgs struct {
	SessionID   string   `json:"session_id" jsonschema:"the debug session to restart (a launched program; it may have ended)"`
	TimeoutS    float64  `json:"timeout_s,omitempty" min:"0.1" max:"600" default:"30" jsonschema:"seconds to wait for the first stop after the restart; default 30"`
	Expressions []string `json:"expressions,omitempty" jsonschema:"expressions to evaluate at the stop"`
}

func (a restartArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

type watchpointArg struct {
	Expression   string `json:"expression,omitempty" jsonschema:"a variable or lvalue in the stopped frame, e.g. counter or p->next; or give address"`
	Address      string `json:"address,omitempty" jsonschema:"a hex address such as 0x7ffd1234 instead of an expression"`
	Size         int    `json:"size,omitempty" min:"1" max:"8" jsonschema:"with address: bytes to watch; default 4"`
	Access       string `json:"access,omitempty" enum:"write,read,readWrite" default:"write" jsonschema:"stop on write (default), read or either"`
	Condition    string `json:"condition,omitempty" jsonschema:"stop only when this expression is true"`
	HitCondition string `json:"hit_condition,omitempty" jsonschema:"stop only on these hits, e.g. 3 (adapter syntax)"`
}

type setWatchpointsArgs struct {
	SessionID   string          `json:"session_id" jsonschema:"the debug session, stopped (at a breakpoint, or paused)"`
	Watchpoints []watchpointArg `json:"watchpoints" jsonschema:"the session's whole new set of watchpoints; empty clears them"`
}

func addDebugRestartWatchTools(s *Server) {
	add(s, spec{
		name:  "debug_restart",
		title: "Restart the program",
		description: "Run the debugged program again from the start with the same configuration and the same breakpoints, keeping the session_id, and wait (up to timeout_s) for the first stop: " +
			"returns where and why it stopped, the stack, the locals and the source (or the exit code). Use it after a fix and a rebuild, or to reproduce a stop again; it works on a session whose program ended. " +
			"Attached and post-mortem (core file) sessions cannot restart.",
		routes: []string{protocol.DebugRestartEndpoint}, destructive: true,
	}, restartSession)
	add(s, spec{
		name:  "debug_set_watchpoints",
		title: "Watch a variable (data breakpoints)",
		description: "Stop the program when a variable (or memory at an address) is written, read, or either: replaces the session's watchpoints. The session must be stopped, since expressions are resolved in the stopped frame; then debug_continue stops where the value changes. " +
			"Supported by lldb-dap (C, C++, Rust); other adapters answer unsupported. Returns each watchpoint with what the adapter watches (e.g. 4 bytes at an address) and whether it is verified.",
		routes: []string{protocol.DebugWatchpointsEndpoint}, idempotent: true,
	}, setWatchpoints)
}

func restartSession(ctx context.Context, tc *toolCall, in restartArgs) (StopView, string, error) {
	tc.s.debug.takeFirstStop(in.SessionID) // restart shows the first stop itself
	wait := in.timeout()
	var res dap.RestartResult
	tc.wait("restarting the program")
	payload := map[string]any{"session_id": in.SessionID, "wait_timeout_ms": max(int(wait/time.Millisecond), 1)}
	if err := tc.call(ctx, protocol.DebugRestartEndpoint, payload, wait+syncSlack, &res); err != nil {
		return StopView{SessionID: in.SessionID}, "", err
	}
	how := "relaunched (program and adapter started again, breakpoints sent again)"
	if res.Method == "restart" {
		how = "restarted by the adapter, breakpoints kept"
	}
	var v StopView
	var err error
	switch res.State {
	case dap.StateEnded:
		v, err = tc.ended(ctx, in.SessionID, res.ExitCode)
	case dap.StateStopped:
		v, err = tc.view(ctx, in.SessionID, 0, viewOpts{expressions: in.Expressions})
	default:
		v = StopView{SessionID: in.SessionID, State: res.State, Note: fmt.Sprintf("no stop within %s", wait.Round(time.Millisecond))}
	}
	if err != nil {
		return v, "", err
	}
	return v, fmt.Sprintf("Session %s %s.\n%s", line(in.SessionID, maxValue), how, renderView(v, stoppedNext)), nil
}

func setWatchpoints(ctx context.Context, tc *toolCall, in setWatchpointsArgs) (dap.WatchpointsResult, string, error) {
	var out dap.WatchpointsResult
	wps := in.Watchpoints
	if wps == nil {
		wps = []watchpointArg{}
	}
	payload := map[string]any{"session_id": in.SessionID, "watchpoints": wps}
	if err := tc.call(ctx, protocol.DebugWatchpointsEndpoint, payload, quickCall, &out); err != nil {
		return out, "", err
	}
	if len(out.Watchpoints) == 0 {
		return out, "Cleared the session's watchpoints.", nil
	}
	var b strings.Builder
	for _, w := range out.Watchpoints {
		what := w.Expression
		if what == "" {
			what = w.Address
		}
		state := "verified"
		if !w.Verified {
			state = "NOT verified"
		}
		fmt.Fprintf(&b, "Watchpoint on %s (%s) %s", line(what, maxValue), line(w.Access, maxValue), state)
		if w.Description != "" {
			fmt.Fprintf(&b, ": %s", line(w.Description, maxMessage))
		}
		if w.Message != "" {
			fmt.Fprintf(&b, " (%s)", line(w.Message, maxMessage))
		}
		b.WriteString(".\n")
	}
	b.WriteString("Next: debug_continue stops where a watched value is accessed.")
	return out, b.String(), nil
}
