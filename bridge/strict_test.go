//go:build !windows

package bridge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
)

// Payloads are decoded strictly on every route: a member the route does
// not know is an error naming it, never ignored.

// TestEveryRouteRefusesAnUnknownPayloadField walks the whole route table,
// so a route added later is held to it too. Ping echoes its payload,
// which is free-form by definition.
func TestEveryRouteRefusesAnUnknownPayloadField(t *testing.T) {
	b := startBridge(t, bridge.Config{SandboxDir: t.TempDir()}, nil)
	params := strings.NewReplacer(":session_id", "s-1", ":workspace_id", "w-1")
	routes := b.Router().Routes()
	if len(routes) < 40 {
		t.Fatalf("only %d routes mounted: %v", len(routes), routes)
	}
	for _, route := range routes {
		if route == protocol.PingEndpoint {
			continue
		}
		t.Run(route, func(t *testing.T) {
			resp := b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "c", Endpoint: params.Replace(route),
				Payload: []byte(`{"zz_not_a_field":1}`), Timeout: 10})
			wantFailure(t, resp, protocol.CodeInvalidPayload)
			if !strings.Contains(resp.Message, `unknown field "zz_not_a_field"`) {
				t.Errorf("message %q does not name the unknown field", resp.Message)
			}
		})
	}
}

func TestRoutePayloadErrorsNameTheFieldAndWhatItProbablyMeant(t *testing.T) {
	b := startBridge(t, bridge.Config{}, nil)
	for _, tc := range []struct {
		endpoint, payload, want string
	}{
		// The two: a typo used to answer "command is empty", and
		// flat breakpoints used to set none and let the program run.
		{protocol.TerminalExecuteEndpoint, `{"comand":"ls"}`, `unknown field "comand" (did you mean "command"?)`},
		{protocol.DebugStartEndpoint, `{"language":"c","program":"p","breakpoints":[{"path":"p.c","line":3}]}`,
			`unknown field "breakpoints[0].line" (did you mean "breakpoints[0].breakpoints[].line"?)`},
		{protocol.DebugBreakpointsEndpoint, `{"session_id":"s","path":"p.c","line":3}`,
			`unknown field "line" (did you mean "breakpoints[].line"?)`},
		{protocol.DebugBreakpointsEndpoint, `{"session_id":"s","path":"p.c","breakpoints":[{"line":"3"}]}`,
			`field "breakpoints[0].line": expected an integer, got a string`},
		{protocol.DebugSnapshotEndpoint, `{"sessionId":"s"}`, `unknown field "sessionId" (did you mean "session_id"?)`},
		{protocol.TerminalExecuteEndpoint, `{"command":"ls","timeout":"5"}`, `field "timeout": expected a number, got a string`},
		{protocol.TerminalExecuteEndpoint, `{"command":"ls","env":{"A":1}}`, `field "env.A": expected a string, got the number 1`},
		{protocol.WorkspaceStrReplaceEndpoint, `{"path":"f","old_str":"a","new":"b"}`, `unknown field "old_str" (did you mean "old"?)`},
	} {
		resp := b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "c", Endpoint: tc.endpoint, Payload: []byte(tc.payload), Timeout: 10})
		wantFailure(t, resp, protocol.CodeInvalidPayload)
		if want := "decoding payload for " + tc.endpoint + ": " + tc.want; resp.Message != want {
			t.Errorf("%s %s:\n got %q\nwant %q", tc.endpoint, tc.payload, resp.Message, want)
		}
	}
}

func TestFreeFormPayloadPartsTakeAnyMembers(t *testing.T) {
	b := startBridge(t, bridge.Config{}, nil)
	// A launch configuration is the adapter's to read: its members are
	// passed on, and this one fails only because no adapter has its type.
	resp := b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "c", Endpoint: protocol.DebugStartEndpoint,
		Payload: []byte(`{"config":{"type":"no-such-adapter","request":"launch","program":"p","anyAdapterOption":{"x":[1]}}}`), Timeout: 10})
	if resp.Error == protocol.CodeInvalidPayload && strings.Contains(resp.Message, "unknown field") {
		t.Fatalf("a launch configuration's member was refused: %+v", resp)
	}
	resp = b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "c", Endpoint: protocol.TerminalExecuteEndpoint,
		Payload: []byte(`{"command":"echo $ANY_NAME","env":{"ANY_NAME":"ok"},"hidden":true}`), Timeout: 10})
	if !resp.Success || !strings.Contains(string(resp.Result), `"output":"ok\n"`) {
		t.Fatalf("env: %+v", resp)
	}
}
