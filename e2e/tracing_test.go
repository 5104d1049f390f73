package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/otlptest"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// The caller's trace context in these tests: a W3C traceparent of a span
// of the caller's.
const (
	callerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID  = "00f067aa0ba902b7"
	callerTP      = "00-" + callerTraceID + "-" + callerSpanID + "-01"
	// payloadMark is in every traced call's payload: no span may carry it.
	payloadMark = "payload-text-never-in-a-span"
)

func TestTraceFollowsACallFromTheEntryBrokerThroughRedisToTheHolder(t *testing.T) {
	recv := otlptest.Start(t)
	e := newRedisEnv(t)
	a := e.brokerWithEnv("a", otlpEnv(recv.URL))
	b := e.brokerWithEnv("b", otlpEnv(recv.URL))
	client := connectRecordingClient(t, b, "ws-traced")
	tok := token(t, auth.RoleCaller, "ws-traced")

	r := a.callWith("ws-traced", tok, tracedBody(), map[string]string{"traceparent": callerTP, "tracestate": "vendor=opaque"})
	if r.err != nil || !r.resp.Success {
		t.Fatalf("call through a to b: %+v %v", r.resp, r.err)
	}
	sent := client.next(t, 5*time.Second)

	spans := recv.Await(t, 10*time.Second, "call, publish and deliver spans of the caller's trace", func(spans []otlptest.Span) bool {
		return len(findSpans(spans, callerTraceID, "tether-broker", "a", "tether.call")) == 1 &&
			len(findSpans(spans, callerTraceID, "tether-broker", "a", "tether.bus.publish")) == 1 &&
			len(findSpans(spans, callerTraceID, "tether-broker", "b", "tether.deliver")) == 1
	})
	call := findSpans(spans, callerTraceID, "tether-broker", "a", "tether.call")[0]
	publish := findSpans(spans, callerTraceID, "tether-broker", "a", "tether.bus.publish")[0]
	deliver := findSpans(spans, callerTraceID, "tether-broker", "b", "tether.deliver")[0]

	// Parented hop by hop: the caller's span, a's call, a's crossing of
	// the bus, b's delivery, and the tool_call the client received.
	for _, c := range []struct {
		span   otlptest.Span
		parent string
		kind   string
	}{
		{call, callerSpanID, "server"},
		{publish, call.SpanID, "producer"},
		{deliver, publish.SpanID, "consumer"},
	} {
		if c.span.ParentSpanID != c.parent {
			t.Errorf("%s: parent %s, want %s", c.span, c.span.ParentSpanID, c.parent)
		}
		if c.span.Kind != c.kind {
			t.Errorf("%s: kind %s, want %s", c.span, c.span.Kind, c.kind)
		}
		assertCallAttrs(t, c.span, "ws-traced", "/api/ping", "success")
		if c.span.Resource["service.version"] == "" {
			t.Errorf("%s: no service.version in its resource %v", c.span, c.span.Resource)
		}
	}
	if call.Attributes["http.route"] != "/api/v1/workspaces/{id}/calls" {
		t.Errorf("call span's http.route = %q", call.Attributes["http.route"])
	}
	if cid := call.Attributes["tether.correlation_id"]; cid != r.resp.CorrelationID || publish.Attributes["tether.correlation_id"] != cid || deliver.Attributes["tether.correlation_id"] != cid {
		t.Errorf("correlation ids: call %q, publish %q, deliver %q; the answer's %q", cid, publish.Attributes["tether.correlation_id"], deliver.Attributes["tether.correlation_id"], r.resp.CorrelationID)
	}
	if want := "00-" + callerTraceID + "-" + deliver.SpanID + "-01"; sent.Traceparent != want {
		t.Errorf("the tool_call reached the client with traceparent %q, want %q (b's deliver span)", sent.Traceparent, want)
	}
	for _, s := range recv.Service("tether-broker") {
		if id := s.Resource["service.instance.id"]; id != "a" && id != "b" {
			t.Errorf("%s: service.instance.id %q, want the broker's --instance-id", s, id)
		}
	}
	if n := len(recv.Trace(callerTraceID)); n < 3 || recv.Batches() == 0 {
		t.Errorf("%d spans of the caller's trace in %d exports", n, recv.Batches())
	}
	assertNoSecrets(t, recv.Spans(), tok)
}

// A call the entry broker holds itself is one span there: its delivery is
// an event on the call span, not a deliver span (which would cost the
// broker as much again: BenchmarkTracingCost).
func TestTraceOfACallTheEntryBrokerHoldsItselfIsItsCallSpanWithADeliverEvent(t *testing.T) {
	recv := otlptest.Start(t)
	e := newRedisEnv(t)
	b := e.brokerWithEnv("b", otlpEnv(recv.URL))
	client := connectRecordingClient(t, b, "ws-here")
	// Until b has joined the workspace's channel, its API's calls go
	// through the bus like any other broker's (localHolder).
	b.waitLine(10*time.Second, "workspace joined", `"ws-here"`)
	tok := token(t, auth.RoleCaller, "ws-here")

	r := b.callWith("ws-here", tok, tracedBody(), map[string]string{"traceparent": callerTP})
	if r.err != nil || !r.resp.Success {
		t.Fatalf("call: %+v %v", r.resp, r.err)
	}
	sent := client.next(t, 5*time.Second)
	spans := recv.Await(t, 10*time.Second, "the call span", func(spans []otlptest.Span) bool {
		return len(findSpans(spans, callerTraceID, "tether-broker", "b", "tether.call")) == 1
	})
	call := findSpans(spans, callerTraceID, "tether-broker", "b", "tether.call")[0]
	if call.ParentSpanID != callerSpanID {
		t.Errorf("call span's parent %s, want the caller's %s", call.ParentSpanID, callerSpanID)
	}
	if len(call.Events) != 1 || call.Events[0] != "tether.deliver" {
		t.Errorf("call span's events %q, want one tether.deliver", call.Events)
	}
	for _, name := range []string{"tether.bus.publish", "tether.deliver"} {
		if n := len(findSpans(spans, callerTraceID, "tether-broker", "b", name)); n != 0 {
			t.Errorf("%d %s spans for a call the entry broker held itself", n, name)
		}
	}
	if want := "00-" + callerTraceID + "-" + call.SpanID + "-01"; sent.Traceparent != want {
		t.Errorf("tool_call traceparent %q, want the call span's %q", sent.Traceparent, want)
	}
	assertCallAttrs(t, call, "ws-here", "/api/ping", "success")
}

func TestTraceStartsAtTheEntryBrokerWithoutATraceparent(t *testing.T) {
	recv := otlptest.Start(t)
	e := newRedisEnv(t)
	a := e.brokerWithEnv("a", otlpEnv(recv.URL))
	b := e.brokerWithEnv("b", otlpEnv(recv.URL))
	client := connectRecordingClient(t, b, "ws-untraced")
	tok := token(t, auth.RoleCaller, "ws-untraced")

	r := a.callWith("ws-untraced", tok, tracedBody(), nil)
	if r.err != nil || !r.resp.Success {
		t.Fatalf("call: %+v %v", r.resp, r.err)
	}
	sent := client.next(t, 5*time.Second)
	call := recv.AwaitSpan(t, 10*time.Second, "a's call span", func(s otlptest.Span) bool {
		return s.Name == "tether.call" && s.Resource["service.instance.id"] == "a" && s.Attributes["tether.correlation_id"] == r.resp.CorrelationID
	})
	if call.ParentSpanID != "" {
		t.Errorf("a call without a traceparent: its span has parent %s, want a root span", call.ParentSpanID)
	}
	deliver := recv.AwaitSpan(t, 10*time.Second, "b's deliver span", func(s otlptest.Span) bool {
		return s.Name == "tether.deliver" && s.TraceID == call.TraceID
	})
	if deliver.Resource["service.instance.id"] != "b" {
		t.Errorf("deliver span from %v, want broker b", deliver.Resource)
	}
	if !strings.HasPrefix(sent.Traceparent, "00-"+call.TraceID+"-"+deliver.SpanID) {
		t.Errorf("tool_call traceparent %q, want trace %s span %s", sent.Traceparent, call.TraceID, deliver.SpanID)
	}
}

func TestMalformedTraceparentStartsANewTraceAndLogsAtDebug(t *testing.T) {
	recv := otlptest.Start(t)
	b := startNamedBroker(t, "broker", otlpEnv(recv.URL))
	client := connectRecordingClient(t, b, "ws-bad-tp")
	tok := token(t, auth.RoleCaller, "ws-bad-tp")

	bad := "00-" + callerTraceID + "-not-a-span-id"
	r := b.callWith("ws-bad-tp", tok, tracedBody(), map[string]string{"traceparent": bad})
	if r.err != nil || !r.resp.Success {
		t.Fatalf("a call with a malformed traceparent: %+v %v", r.resp, r.err)
	}
	b.waitLine(5*time.Second, `"level":"debug"`, "malformed traceparent ignored")
	sent := client.next(t, 5*time.Second)
	call := recv.AwaitSpan(t, 10*time.Second, "the call's span", func(s otlptest.Span) bool {
		return s.Name == "tether.call" && s.Attributes["tether.correlation_id"] == r.resp.CorrelationID
	})
	if call.ParentSpanID != "" || call.TraceID == callerTraceID {
		t.Errorf("call span %s: want a new trace (a root span)", call)
	}
	if !strings.HasPrefix(sent.Traceparent, "00-"+call.TraceID+"-") {
		t.Errorf("tool_call traceparent %q, want the new trace %s", sent.Traceparent, call.TraceID)
	}
}

func TestUnreachableOTLPEndpointCostsTheCallNothingAndCountsDroppedSpans(t *testing.T) {
	env := append(otlpEnv("http://"+closedPort(t)), "OTEL_EXPORTER_OTLP_TIMEOUT=500")
	b := startNamedBroker(t, "broker", env)
	b.waitLine(5*time.Second, "tracing on")
	startBridge(t, b, "ws-down")
	tok := token(t, auth.RoleCaller, "ws-down")

	const calls = 20
	var slowest time.Duration
	for i := range calls {
		r := b.callWith("ws-down", tok, fmt.Sprintf(`{"endpoint":"/api/ping","payload":{"n":%d},"timeout":5}`, i), map[string]string{"traceparent": callerTP})
		if r.err != nil || !r.resp.Success {
			t.Fatalf("call %d with the OTLP endpoint down: %+v %v", i, r.resp, r.err)
		}
		slowest = max(slowest, r.elapsed)
	}
	// A ping through the bridge takes milliseconds; a call that waited on
	// the exporter would take its timeout (500 ms) or more.
	if slowest > 400*time.Millisecond {
		t.Errorf("slowest call with the OTLP endpoint down took %v", slowest)
	}
	t.Logf("slowest of %d calls with the OTLP endpoint down: %v", calls, slowest)
	// Each call is one span on this broker, which holds the workspace: the
	// call span, its delivery an event on it.
	testwait.Until(t, 15*time.Second, func() bool {
		return b.metric("tether_trace_spans_dropped_total") >= calls
	}, "tether_trace_spans_dropped_total reaching %d", calls)
}

func TestTracingOffPassesTheCallersTraceparentThroughUnchanged(t *testing.T) {
	e := newRedisEnv(t)
	a := e.brokerWithEnv("a", nil)
	b := e.brokerWithEnv("b", nil)
	client := connectRecordingClient(t, b, "ws-plain")
	tok := token(t, auth.RoleCaller, "ws-plain")

	for _, entry := range []*brokerProc{a, b} { // through the bus, and held by the entry broker
		r := entry.callWith("ws-plain", tok, tracedBody(), map[string]string{"traceparent": callerTP})
		if r.err != nil || !r.resp.Success {
			t.Fatalf("call through %s: %+v %v", entry.name, r.resp, r.err)
		}
		if sent := client.next(t, 5*time.Second); sent.Traceparent != callerTP {
			t.Errorf("entering %s: tool_call traceparent %q, want the caller's %q unchanged", entry.name, sent.Traceparent, callerTP)
		}
	}
	// Without a traceparent, none.
	r := a.callWith("ws-plain", tok, tracedBody(), nil)
	if r.err != nil || !r.resp.Success {
		t.Fatalf("call: %+v %v", r.resp, r.err)
	}
	if sent := client.next(t, 5*time.Second); sent.Traceparent != "" {
		t.Errorf("tracing off, no traceparent given: the tool_call carries %q", sent.Traceparent)
	}
	for _, p := range []*brokerProc{a, b} {
		if n := countLines(p.proc, "tracing on"); n != 0 {
			t.Errorf("%s logged tracing on without OTEL_* set", p.name)
		}
	}
}

// tracedBody is a call of /api/ping whose payload holds payloadMark.
func tracedBody() string {
	return `{"endpoint":"/api/ping","payload":{"note":"` + payloadMark + `"},"timeout":5}`
}

// assertCallAttrs checks the attributes every span of a call carries.
func assertCallAttrs(t *testing.T, s otlptest.Span, ws, endpoint, outcome string) {
	t.Helper()
	for k, want := range map[string]string{"tether.workspace_id": ws, "tether.endpoint": endpoint, "tether.outcome": outcome} {
		if got := s.Attributes[k]; got != want {
			t.Errorf("%s: %s = %q, want %q", s, k, got, want)
		}
	}
	if s.Attributes["tether.correlation_id"] == "" {
		t.Errorf("%s: no tether.correlation_id", s)
	}
}

// assertNoSecrets scans every attribute of every span, and its resource,
// for the payload's text and the caller's token.
func assertNoSecrets(t *testing.T, spans []otlptest.Span, tok string) {
	t.Helper()
	if len(spans) == 0 {
		t.Fatal("no spans to scan")
	}
	for _, s := range spans {
		for _, m := range []map[string]string{s.Attributes, s.Resource} {
			for k, v := range m {
				if strings.Contains(v, payloadMark) || strings.Contains(v, tok) || strings.Contains(v, secret) {
					t.Errorf("%s: attribute %s carries a payload or a token: %q", s, k, v)
				}
			}
		}
	}
}

// brokerWithEnv starts `tether broker` named name on this Redis with env
// added to its environment.
func (e *redisEnv) brokerWithEnv(name string, env []string, extra ...string) *brokerProc {
	e.t.Helper()
	args := append(append([]string{"--instance-id", name}, e.flags()...), extra...)
	return startNamedBroker(e.t, "broker "+name, env, args...)
}

// recordingClient is a workspace client on a raw WebSocket: it answers
// every tool_call with success and keeps the tool_calls as they came on
// the wire, so a test sees what a client of the socket protocol gets.
type recordingClient struct {
	calls chan protocol.ToolCall
}

// connectRecordingClient connects a recordingClient for ws to b and waits
// until b holds ws; it goes in t.Cleanup.
func connectRecordingClient(t *testing.T, b *brokerProc, ws string) *recordingClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, _, err := websocket.Dial(ctx, strings.Replace(b.url, "http", "ws", 1)+"/socket.io/?EIO=4&transport=websocket", nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	conn.SetReadLimit(16 << 20)
	if _, _, err := conn.Read(ctx); err != nil { // open packet
		t.Fatal(err)
	}
	if err := conn.Write(ctx, websocket.MessageText, []byte(`40{"token":"`+token(t, auth.RoleBridge, ws)+`","workspace_id":"`+ws+`"}`)); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := conn.Read(ctx); err != nil || !strings.HasPrefix(string(msg), "40") {
		t.Fatalf("CONNECT ack: %q, %v", msg, err)
	}
	rc := &recordingClient{calls: make(chan protocol.ToolCall, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, msg, err := conn.Read(ctx)
			if err != nil {
				return
			}
			s := string(msg)
			switch {
			case s == "2":
				_ = conn.Write(ctx, websocket.MessageText, []byte("3"))
			case strings.HasPrefix(s, "42"):
				ack, call, ok := parseToolCallFrame(s)
				if !ok {
					continue
				}
				select {
				case rc.calls <- call:
				default:
				}
				resp, _ := json.Marshal(protocol.Success(call.CorrelationID, json.RawMessage(`{"ok":true}`)))
				_ = conn.Write(ctx, websocket.MessageText, []byte("43"+ack+"["+string(resp)+"]"))
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = conn.CloseNow()
		<-done
	})
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "%s holding %s", b.name, ws)
	return rc
}

// parseToolCallFrame reads `42<ack>["tool_call",{...}]`.
func parseToolCallFrame(s string) (ack string, call protocol.ToolCall, ok bool) {
	rest := s[2:]
	i := strings.IndexByte(rest, '[')
	if i < 0 {
		return "", call, false
	}
	var parts []json.RawMessage
	var name string
	if json.Unmarshal([]byte(rest[i:]), &parts) != nil || len(parts) != 2 || json.Unmarshal(parts[0], &name) != nil || name != protocol.EventToolCall {
		return "", call, false
	}
	if json.Unmarshal(parts[1], &call) != nil {
		return "", call, false
	}
	return rest[:i], call, true
}

// next returns the next tool_call the client received.
func (rc *recordingClient) next(t *testing.T, within time.Duration) protocol.ToolCall {
	t.Helper()
	select {
	case c := <-rc.calls:
		return c
	case <-time.After(within):
		t.Fatalf("no tool_call reached the client within %s", within)
		return protocol.ToolCall{}
	}
}

func TestMCPToolCallContinuesTheTraceparentOfItsMeta(t *testing.T) {
	recv := otlptest.Start(t)
	b := startNamedBroker(t, "broker", otlpEnv(recv.URL))
	startBridge(t, b, "ws-mcp-traced")
	tok := token(t, auth.RoleCaller, "ws-mcp-traced")
	routes := map[string]string{ // the broker's door the transport comes in by
		"http":  "/api/v1/workspaces/{id}/mcp",
		"stdio": "/api/v1/workspaces/{id}/calls", // tether mcp relays to the call API
	}
	overMCP(t, b, "ws-mcp-traced", tok, func(t *testing.T, c *mcpClient) {
		traceID := fmt.Sprintf("%032x", time.Now().UnixNano())
		r := c.callWithMeta("terminal_run", map[string]any{"command": "true"}, map[string]any{"traceparent": "00-" + traceID + "-" + callerSpanID + "-01"})
		if r.Err != "" || r.IsError {
			t.Fatalf("terminal_run: %q %q", r.Err, r.Text)
		}
		call := recv.AwaitSpan(t, 10*time.Second, "the tool's call span in the trace of its _meta", func(s otlptest.Span) bool {
			return s.Name == "tether.call" && s.TraceID == traceID
		})
		transport := t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]
		if call.ParentSpanID != callerSpanID || call.Attributes["http.route"] != routes[transport] {
			t.Errorf("call span %s: want parent %s and http.route %s", call, callerSpanID, routes[transport])
		}
		assertCallAttrs(t, call, "ws-mcp-traced", call.Attributes["tether.endpoint"], "success")
	})
}

func TestCallCommandSendsItsTraceparent(t *testing.T) {
	recv := otlptest.Start(t)
	b := startNamedBroker(t, "broker", otlpEnv(recv.URL))
	startBridge(t, b, "ws-cli-traced")
	tok := token(t, auth.RoleCaller, "ws-cli-traced")
	run := func(env []string, args ...string) int {
		cmd := exec.Command(tetherBin, append([]string{"call", "--broker", b.url, "--token", tok, "--workspace", "ws-cli-traced", "--compact"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		return exitCode(t, cmd)
	}
	for name, c := range map[string]struct {
		env  []string
		args []string
	}{
		"flag": {nil, []string{"--traceparent", "00-%s-" + callerSpanID + "-01"}},
		"env":  {[]string{"TRACEPARENT=00-%s-" + callerSpanID + "-01"}, nil},
	} {
		traceID := fmt.Sprintf("%032x", time.Now().UnixNano())
		env, args := slices.Clone(c.env), slices.Clone(c.args)
		for i := range env {
			env[i] = fmt.Sprintf(env[i], traceID)
		}
		for i := range args {
			if strings.Contains(args[i], "%s") {
				args[i] = fmt.Sprintf(args[i], traceID)
			}
		}
		if code := run(env, append(args, "/api/ping", `{}`)...); code != 0 {
			t.Fatalf("%s: tether call exited %d", name, code)
		}
		call := recv.AwaitSpan(t, 10*time.Second, name+": the call span in the caller's trace", func(s otlptest.Span) bool {
			return s.Name == "tether.call" && s.TraceID == traceID
		})
		if call.ParentSpanID != callerSpanID {
			t.Errorf("%s: call span %s, want parent %s", name, call, callerSpanID)
		}
	}
	if code := run(nil, "--traceparent", "not-a-traceparent", "/api/ping"); code != 2 {
		t.Errorf("tether call --traceparent not-a-traceparent exited %d, want 2 (usage)", code)
	}
}

// callWithMeta calls a tool with params._meta set to meta and waits for
// its outcome.
func (c *mcpClient) callWithMeta(name string, args any, meta map[string]any) mcpResult {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.results[id] = make(chan mcpResult, 1)
	c.mu.Unlock()
	c.send(map[string]any{"cmd": "call", "id": id, "name": name, "arguments": args, "meta": meta})
	return c.wait(id, 30*time.Second)
}

func TestAsyncCallDeliveryJoinsTheSubmittersTrace(t *testing.T) {
	recv := otlptest.Start(t)
	e := newRedisEnv(t)
	a := e.brokerWithEnv("a", otlpEnv(recv.URL))
	b := e.brokerWithEnv("b", otlpEnv(recv.URL))
	client := connectRecordingClient(t, b, "ws-async-traced")
	tok := token(t, auth.RoleCaller, "ws-async-traced")

	// Through the store and the bus (a), and to the holder itself (b).
	for _, entry := range []*brokerProc{a, b} {
		traceID := fmt.Sprintf("%032x", time.Now().UnixNano())
		r := entry.callWith("ws-async-traced", tok, `{"endpoint":"/api/ping","payload":{},"timeout":5,"async":true}`,
			map[string]string{"traceparent": "00-" + traceID + "-" + callerSpanID + "-01"})
		if r.status != http.StatusAccepted {
			t.Fatalf("submit through %s: HTTP %d %+v %v", entry.name, r.status, r.resp, r.err)
		}
		sent := client.next(t, 5*time.Second)
		submit := recv.AwaitSpan(t, 10*time.Second, "the submit's span", func(s otlptest.Span) bool {
			return s.Name == "tether.call" && s.TraceID == traceID && s.Resource["service.instance.id"] == entry.instance
		})
		deliver := recv.AwaitSpan(t, 10*time.Second, "b's deliver span in the submitter's trace", func(s otlptest.Span) bool {
			return s.Name == "tether.deliver" && s.TraceID == traceID && s.Resource["service.instance.id"] == "b"
		})
		if submit.ParentSpanID != callerSpanID || deliver.ParentSpanID != submit.SpanID {
			t.Errorf("through %s: submit %s (want parent %s), deliver %s (want parent the submit's %s)", entry.name, submit, callerSpanID, deliver, submit.SpanID)
		}
		if want := "00-" + traceID + "-" + deliver.SpanID + "-01"; sent.Traceparent != want {
			t.Errorf("through %s: tool_call traceparent %q, want %q", entry.name, sent.Traceparent, want)
		}
		assertCallAttrs(t, deliver, "ws-async-traced", "/api/ping", "success")
	}
}

// TestTraceSpansTheEntryBrokerTheHolderAndTheBridge is issue 31's whole
// trace: a call entering broker a with a traceparent, for a workspace whose
// traced bridge is held by broker b on Redis, leaves spans from a, b and
// the bridge in the caller's trace, each the child of the hop before.
func TestTraceSpansTheEntryBrokerTheHolderAndTheBridge(t *testing.T) {
	recv := otlptest.Start(t)
	e := newRedisEnv(t)
	a := e.brokerWithEnv("a", otlpEnv(recv.URL))
	b := e.brokerWithEnv("b", otlpEnv(recv.URL))
	tracedBridge(t, b, "ws-whole", t.TempDir(), otlpEnv(recv.URL)...)
	tok := token(t, auth.RoleCaller, "ws-whole")

	r := a.callWith("ws-whole", tok, tracedBody(), map[string]string{"traceparent": callerTP})
	if r.err != nil || !r.resp.Success {
		t.Fatalf("call through a to b's bridge: %+v %v", r.resp, r.err)
	}
	spans := recv.Await(t, 10*time.Second, "spans of a, b and the bridge in the caller's trace", func(spans []otlptest.Span) bool {
		return len(findSpans(spans, callerTraceID, "tether-broker", "a", "tether.call")) == 1 &&
			len(findSpans(spans, callerTraceID, "tether-broker", "a", "tether.bus.publish")) == 1 &&
			len(findSpans(spans, callerTraceID, "tether-broker", "b", "tether.deliver")) == 1 &&
			len(otlptest.Filter(spans, func(s otlptest.Span) bool {
				return s.TraceID == callerTraceID && s.Name == "tether.bridge.call"
			})) == 1
	})
	call := findSpans(spans, callerTraceID, "tether-broker", "a", "tether.call")[0]
	publish := findSpans(spans, callerTraceID, "tether-broker", "a", "tether.bus.publish")[0]
	deliver := findSpans(spans, callerTraceID, "tether-broker", "b", "tether.deliver")[0]
	bridgeCall := otlptest.Filter(spans, func(s otlptest.Span) bool { return s.TraceID == callerTraceID && s.Name == "tether.bridge.call" })[0]
	for _, c := range []struct {
		span   otlptest.Span
		parent string
	}{{call, callerSpanID}, {publish, call.SpanID}, {deliver, publish.SpanID}, {bridgeCall, deliver.SpanID}} {
		if c.span.ParentSpanID != c.parent {
			t.Errorf("%s: parent %s, want %s", c.span, c.span.ParentSpanID, c.parent)
		}
		assertCallAttrs(t, c.span, "ws-whole", "/api/ping", "success")
	}
	if bridgeCall.Resource["service.name"] != "tether-bridge" {
		t.Errorf("bridge span's resource %v, want service.name tether-bridge", bridgeCall.Resource)
	}
	assertNoSecrets(t, recv.Spans(), tok)
}
