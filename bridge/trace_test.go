//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/internal/tracing/tracingtest"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

// A caller's trace context, as the broker puts it in tool_call.
const (
	callerTrace       = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan        = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// ended returns the ended spans named name.
func ended(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// oneSpan waits until exactly one span named name has ended and returns it.
func oneSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	testwait.Until(t, waitLimit, func() bool { return len(ended(rec, name)) > 0 }, "a %s span", name)
	spans := ended(rec, name)
	if len(spans) != 1 {
		t.Fatalf("%d %s spans, want 1", len(spans), name)
	}
	return spans[0]
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs checks the string attributes of s.
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if g, ok := got[attribute.Key(k)]; !ok || g.String() != v {
			t.Errorf("%s: attribute %s = %q (set %v), want %q", s.Name(), k, g.String(), ok, v)
		}
	}
}

// noAttributeHolds fails if any attribute or status of any recorded span
// contains one of secrets: spans carry names, never payloads.
func noAttributeHolds(t *testing.T, rec *tracetest.SpanRecorder, secrets ...string) {
	t.Helper()
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			for _, secret := range secrets {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %s attribute %s = %q holds payload text %q", s.Name(), kv.Key, kv.Value.String(), secret)
				}
			}
		}
		for _, secret := range secrets {
			if strings.Contains(s.Status().Description, secret) {
				t.Errorf("span %s status %q holds payload text %q", s.Name(), s.Status().Description, secret)
			}
		}
	}
}

// TestCallSpanContinuesTheToolCallTraceparent: a call from the broker with
// a traceparent runs under a server span of the same trace whose parent is
// the broker's span, naming the workspace, endpoint, correlation id,
// transport and outcome, never the payload; the handler's ctx carries it.
func TestCallSpanContinuesTheToolCallTraceparent(t *testing.T) {
	rec := tracingtest.Record(t)
	f := newFakeBroker(t, protocol.OpenInfo{})
	handlerSpan := make(chan trace.SpanContext, 1)
	startBridge(t, bridge.Config{BrokerURL: f.url(), WorkspaceID: "ws-trace"}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/traced", func(ctx context.Context, _ *bridge.Call, req map[string]any) (map[string]any, error) {
			handlerSpan <- trace.SpanContextFromContext(ctx)
			return req, nil
		})
	})
	c := f.accept(t)
	c.call(t, 7, protocol.ToolCall{CorrelationID: "corr-1", Endpoint: "/api/test/traced",
		Payload: json.RawMessage(`{"secret":"payload-text-xyz"}`), Timeout: 10, Traceparent: callerTraceparent})
	if _, resp := c.response(t); !resp.Success {
		t.Fatalf("response %+v, want success", resp)
	}
	s := oneSpan(t, rec, "tether.bridge.call")
	if got := s.SpanContext().TraceID().String(); got != callerTrace {
		t.Errorf("trace id %s, want the caller's %s", got, callerTrace)
	}
	if got := s.Parent().SpanID().String(); got != callerSpan || !s.Parent().IsRemote() {
		t.Errorf("parent span %s (remote %v), want the caller's %s", got, s.Parent().IsRemote(), callerSpan)
	}
	if s.SpanKind() != trace.SpanKindServer {
		t.Errorf("kind %v, want server", s.SpanKind())
	}
	wantAttrs(t, s, map[string]string{"tether.workspace_id": "ws-trace", "tether.endpoint": "/api/test/traced",
		"tether.correlation_id": "corr-1", "tether.transport": "socket", "tether.outcome": "success"})
	if got := recv(t, handlerSpan, "the handler's span"); got.SpanID() != s.SpanContext().SpanID() {
		t.Errorf("the handler's ctx carries span %s, want the call's %s", got.SpanID(), s.SpanContext().SpanID())
	}
	noAttributeHolds(t, rec, "payload-text-xyz")
}

// TestMalformedTraceparentStartsANewTraceAndIsLoggedAtDebug: a call whose
// traceparent does not parse is served as usual, under a root span of a
// new trace, and the bridge says so at debug (without the value).
func TestMalformedTraceparentStartsANewTraceAndIsLoggedAtDebug(t *testing.T) {
	rec := tracingtest.Record(t)
	logs := newLogSink(t)
	b := startBridge(t, bridge.Config{WorkspaceID: "ws-trace", Logger: logs.logger()}, nil)
	// An in-process caller's span must not become the parent either: the
	// call named a (broken) context of its own.
	ctx, outer := otel.Tracer("test").Start(context.Background(), "outer")
	defer outer.End()
	resp := b.Dispatch(ctx, protocol.ToolCall{CorrelationID: "corr-2", Endpoint: protocol.PingEndpoint,
		Payload: json.RawMessage(`{}`), Timeout: 10, Traceparent: "00-not-a-traceparent-zz"})
	if !resp.Success {
		t.Fatalf("response %+v, want success", resp)
	}
	s := oneSpan(t, rec, "tether.bridge.call")
	if s.Parent().IsValid() {
		t.Errorf("parent %v, want none: a new trace", s.Parent())
	}
	if !s.SpanContext().TraceID().IsValid() || s.SpanContext().TraceID() == outer.SpanContext().TraceID() {
		t.Errorf("trace id %s, want a new valid one", s.SpanContext().TraceID())
	}
	wantAttrs(t, s, map[string]string{"tether.transport": "inproc", "tether.outcome": "success"})
	logs.waitFor(t, "malformed traceparent ignored")
	if strings.Contains(logs.String(), "not-a-traceparent") {
		t.Errorf("the log quotes the malformed traceparent:\n%s", logs.String())
	}
}

// TestFailedCallSpanCarriesTheErrorCode: the outcome of a failed call is
// its error code, and the span's status is an error.
func TestFailedCallSpanCarriesTheErrorCode(t *testing.T) {
	rec := tracingtest.Record(t)
	b := startBridge(t, bridge.Config{WorkspaceID: "ws-trace"}, nil)
	wantFailure(t, b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "corr-3", Endpoint: "/api/nope", Timeout: 10}),
		protocol.CodeUnknownRoute)
	s := oneSpan(t, rec, "tether.bridge.call")
	wantAttrs(t, s, map[string]string{"tether.outcome": protocol.CodeUnknownRoute, "tether.endpoint": "/api/nope"})
	if s.Status().Code != codes.Error {
		t.Errorf("status %v, want error", s.Status())
	}
}

// TestHTTPTraceparentHeaderContinuesTheTrace: on the local HTTP listener
// the caller's Traceparent header is the call's parent.
func TestHTTPTraceparentHeaderContinuesTheTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	base, client := httpBridge(t, bridge.Config{}, nil)
	status, resp := post(t, client, base+protocol.PingEndpoint, `{"a":1}`,
		map[string]string{bridge.HeaderTraceparent: callerTraceparent, bridge.HeaderCorrelationID: "corr-4"})
	if status != http.StatusOK || !resp.Success {
		t.Fatalf("%d %+v, want 200 success", status, resp)
	}
	s := oneSpan(t, rec, "tether.bridge.call")
	if s.SpanContext().TraceID().String() != callerTrace || s.Parent().SpanID().String() != callerSpan {
		t.Errorf("span %v with parent %v, want trace %s under span %s", s.SpanContext(), s.Parent(), callerTrace, callerSpan)
	}
	wantAttrs(t, s, map[string]string{"tether.transport": "local_http", "tether.workspace_id": "ws-http", "tether.correlation_id": "corr-4"})
}

// TestTerminalCommandIsASpanWithItsExitCode: a command run by
// /api/terminal/execute is a terminal.exec span under the call's, with
// its exit code and where it ran, never the command line or its output.
func TestTerminalCommandIsASpanWithItsExitCode(t *testing.T) {
	rec := tracingtest.Record(t)
	b := startBridge(t, bridge.Config{WorkspaceID: "ws-trace"}, nil)
	resp := b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "corr-5", Endpoint: protocol.TerminalExecuteEndpoint,
		Payload: mustJSON(t, map[string]any{"command": "echo secret-output-abc; exit 3", "hidden": true}), Timeout: 20})
	var r terminal.ExecResult
	if !resp.Success || json.Unmarshal(resp.Result, &r) != nil || r.ExitCode != 3 {
		t.Fatalf("response %+v, want the command's result with exit code 3", resp)
	}
	call := oneSpan(t, rec, "tether.bridge.call")
	exec := oneSpan(t, rec, "terminal.exec")
	if exec.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Errorf("terminal.exec parent %s, want the call's span %s", exec.Parent().SpanID(), call.SpanContext().SpanID())
	}
	got := attrs(exec)
	if got["process.exit.code"].AsInt64() != 3 || got["tether.exec.runtime"].AsString() != "hidden" || got["tether.exec.async"].AsBool() {
		t.Errorf("terminal.exec attributes %v, want exit code 3, runtime hidden, not async", exec.Attributes())
	}
	if exec.Status().Code != codes.Error {
		t.Errorf("status %v, want error for a non-zero exit", exec.Status())
	}
	if d := exec.EndTime().Sub(exec.StartTime()); d <= 0 || d > 20*time.Second {
		t.Errorf("terminal.exec lasted %v", d)
	}
	noAttributeHolds(t, rec, "secret-output-abc", "echo")
}

// TestDebugRequestsAreSpansUnderTheCall: with a real debug session (the
// built-in Node adapter), each DAP request start-session sends is a
// dap.<command> client span, child of the call's span, naming the command
// and adapter and never the launch arguments.
func TestDebugRequestsAreSpansUnderTheCall(t *testing.T) {
	rec := tracingtest.Record(t)
	root := t.TempDir()
	src, err := os.ReadFile("../dap/node/testdata/programs/calc.js")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "calc.js"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, bridge.Config{WorkspaceID: "ws-trace", Root: root}, nil)
	resp := b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "corr-6", Endpoint: protocol.DebugStartEndpoint, Timeout: 60,
		Payload: mustJSON(t, map[string]any{"language": "javascript", "program": "calc.js", "args": []string{"secret-arg-q7"},
			"breakpoints": []map[string]any{{"path": "calc.js", "breakpoints": []map[string]any{{"line_content": "return r;"}}}}})})
	if resp.Error == protocol.CodeDebugAdapterUnavailable && os.Getenv("CI") == "" {
		t.Skipf("the node adapter is unavailable: %s", resp.Message)
	}
	var start struct {
		SessionID string `json:"session_id"`
	}
	if !resp.Success || json.Unmarshal(resp.Result, &start) != nil {
		t.Fatalf("start-session: %+v", resp)
	}
	defer b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "corr-7", Endpoint: protocol.DebugStopEndpoint,
		Payload: mustJSON(t, map[string]any{"session_id": start.SessionID}), Timeout: 30})
	var call sdktrace.ReadOnlySpan
	for _, s := range ended(rec, "tether.bridge.call") {
		if attrs(s)["tether.correlation_id"].AsString() == "corr-6" {
			call = s
		}
	}
	if call == nil {
		t.Fatal("no span for the start-session call")
	}
	seen := map[string]bool{}
	for _, s := range rec.Ended() {
		if !strings.HasPrefix(s.Name(), "dap.") || s.Parent().SpanID() != call.SpanContext().SpanID() {
			continue
		}
		a := attrs(s)
		seen[a["dap.command"].AsString()] = true
		if s.Name() != "dap."+a["dap.command"].AsString() || a["dap.adapter"].AsString() != "node" || a["dap.seq"].AsInt64() <= 0 ||
			s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %s: kind %v, attributes %v; want a client span naming its command, adapter node and seq", s.Name(), s.SpanKind(), s.Attributes())
		}
		if a["dap.outcome"].AsString() != "success" {
			t.Errorf("span %s: outcome %q, want success", s.Name(), a["dap.outcome"].AsString())
		}
	}
	for _, cmd := range []string{"initialize", "launch", "setBreakpoints", "configurationDone"} {
		if !seen[cmd] {
			t.Errorf("no dap.%s span under the start-session call (saw %v)", cmd, seen)
		}
	}
	noAttributeHolds(t, rec, "secret-arg-q7", "calc.js")
}
