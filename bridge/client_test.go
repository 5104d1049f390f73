//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
)

// The Socket.IO client against fakeBrokerForTest, which plays the broker
// frame by frame. Replace with the real broker package once it lands.

func brokerBridge(t testing.TB, f *fakeBrokerForTest, cfg bridge.Config, mount func(r *bridge.Router)) (*bridge.Bridge, *logSink) {
	t.Helper()
	logs := newLogSink(t)
	if cfg.BrokerURL == "" {
		cfg.BrokerURL = f.url()
	}
	if cfg.WorkspaceID == "" {
		cfg.WorkspaceID = "ws-1"
	}
	if cfg.Token == "" {
		cfg.Token = "tok-1"
	}
	cfg.Logger = logs.logger()
	// Reconnect at once unless a test is about backoff.
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = time.Millisecond
		cfg.BackoffMax = 2 * time.Millisecond
	}
	return startBridge(t, cfg, mount), logs
}

func pingCall(id string) protocol.ToolCall {
	return protocol.ToolCall{CorrelationID: id, Endpoint: protocol.PingEndpoint, Payload: json.RawMessage(`{"id":"` + id + `"}`), Timeout: 5}
}

func TestClientConnectSendsCredentials(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	b, _ := brokerBridge(t, f, bridge.Config{WorkspaceID: "ws-auth", Token: "secret-token"}, nil)
	c := f.accept(t)
	if got := c.auth["token"]; got != "secret-token" {
		t.Errorf("CONNECT token = %q, want secret-token", got)
	}
	if got := c.auth["workspace_id"]; got != "ws-auth" {
		t.Errorf("CONNECT workspace_id = %q, want ws-auth", got)
	}
	if got := c.header.Get("Authorization"); got != "Bearer secret-token" {
		t.Errorf("upgrade Authorization = %q, want Bearer secret-token", got)
	}
	a := recv(t, f.attempts, "the upgrade request")
	if a.path != "/socket.io/" || !strings.Contains(a.query, "EIO=4") || !strings.Contains(a.query, "transport=websocket") {
		t.Errorf("upgrade request %s?%s, want /socket.io/?EIO=4&transport=websocket", a.path, a.query)
	}
	recv(t, b.Connected(), "Connected")
}

func TestClientAcceptsBrokerURLForms(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	host := strings.TrimPrefix(f.url(), "http://")
	for _, tc := range []struct{ url, path string }{
		{"http://" + host, "/socket.io/"},
		{"ws://" + host + "/", "/socket.io/"},
		{host, "/socket.io/"},
		{"http://" + host + "/socket.io", "/socket.io/"},
		{"ws://" + host + "/socket.io/?EIO=3", "/socket.io/"},
		{"http://" + host + "/tether/", "/tether/socket.io/"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			b, err := bridge.New(bridge.Config{BrokerURL: tc.url, WorkspaceID: "w", Root: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- b.Run(ctx) }()
			a := recv(t, f.attempts, "the upgrade request")
			f.accept(t)
			cancel()
			if err := recv(t, done, "Run to return"); err != nil {
				t.Errorf("Run: %v", err)
			}
			if a.path != tc.path || !strings.Contains(a.query, "EIO=4") {
				t.Errorf("dialed %s?%s, want %s?EIO=4…", a.path, a.query, tc.path)
			}
		})
	}
}

func TestClientConnectionOutlivesHandshakeTimeout(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	brokerBridge(t, f, bridge.Config{HandshakeTimeout: 100 * time.Millisecond}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/wait", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			<-ctx.Done()
			return struct{}{}, ctx.Err()
		})
	})
	c := f.accept(t)
	// A call that lasts past the handshake timeout (its handler waits for
	// its 450ms deadline) ...
	c.call(t, 1, protocol.ToolCall{CorrelationID: "long", Endpoint: "/api/test/wait", Timeout: 0.5})
	_, resp := c.response(t)
	wantFailure(t, resp, protocol.CodeHandlerTimeout)
	// ... and the connection that carried it is still the one serving.
	c.call(t, 2, pingCall("same-conn"))
	_, resp = c.response(t)
	wantSuccess(t, resp, `{"id":"same-conn"}`)
	if len(f.conns) != 0 {
		t.Error("the bridge reconnected: the handshake timeout outlived the handshake")
	}
}

func TestClientAnswersPingWithPong(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	brokerBridge(t, f, bridge.Config{}, nil)
	c := f.accept(t)
	c.send(t, "2")
	if got := c.next(t); got != "3" {
		t.Errorf("answer to ping = %q, want 3", got)
	}
	c.send(t, "2probe")
	if got := c.next(t); got != "3probe" {
		t.Errorf("answer to ping = %q, want 3probe", got)
	}
}

// pingThroughFake sends a bridge connected to a fake broker a ping call
// with ack id ack, checks that the answer carries its correlation id and
// echo, and returns the ack id the answer came with.
func pingThroughFake(t *testing.T, ack int64, corr string) int64 {
	t.Helper()
	f := newFakeBroker(t, protocol.OpenInfo{})
	brokerBridge(t, f, bridge.Config{}, nil)
	c := f.accept(t)
	c.call(t, ack, pingCall(corr))
	got, resp := c.response(t)
	if resp.CorrelationID != corr {
		t.Errorf("correlation_id = %q, want %s", resp.CorrelationID, corr)
	}
	wantSuccess(t, resp, `{"id":"`+corr+`"}`)
	return got
}

func TestClientAnswersToolCallByAck(t *testing.T) {
	if ack := pingThroughFake(t, 17, "corr-1"); ack != 17 {
		t.Errorf("ack id = %d, want 17", ack)
	}
}

func TestClientAnswersToolCallWithoutAckByEvent(t *testing.T) {
	if ack := pingThroughFake(t, protocol.NoAck, "corr-ev"); ack != protocol.NoAck {
		t.Errorf("answered by ack %d, want a tool_response event", ack)
	}
}

func TestClientAnswersBinaryToolCall(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	brokerBridge(t, f, bridge.Config{}, nil)
	c := f.accept(t)
	c.send(t, `451-3["tool_call",{"correlation_id":"bin-1","endpoint":"/api/ping","payload":{"blob":{"_placeholder":true,"num":0}},"timeout":5}]`)
	c.sendBinary(t, []byte("hi"))
	ack, resp := c.response(t)
	if ack != 3 {
		t.Errorf("ack id = %d, want 3", ack)
	}
	wantSuccess(t, resp, `{"blob":"aGk="}`)
}

func TestClientReconnectsAfterServerClosesSocketAndResumesServing(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	b, logs := brokerBridge(t, f, bridge.Config{}, nil)
	c1 := f.accept(t)
	recv(t, b.Connected(), "the first connection")
	_ = c1.ws.CloseNow()

	c2 := f.accept(t)
	c2.call(t, 1, pingCall("after-reconnect"))
	_, resp := c2.response(t)
	wantSuccess(t, resp, `{"id":"after-reconnect"}`)
	logs.waitFor(t, "disconnected from broker; reconnecting")
	if err := b.WaitConnected(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestClientReconnectsWhenPingsStop(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{PingInterval: 100, PingTimeout: 100})
	_, logs := brokerBridge(t, f, bridge.Config{}, nil)
	c1 := f.accept(t)
	// Pings keep the connection: the second arrives after the first
	// deadline would have passed had the first not reset it.
	c1.send(t, "2")
	if got := c1.next(t); got != "3" {
		t.Fatalf("answer to ping = %q", got)
	}
	// Then silence: the bridge must give up on the connection by itself.
	c1.waitClosed(t)
	f.accept(t)
	logs.waitFor(t, "no ping from broker")
}

// authBackoff is the Config.AuthBackoff of the refused-credentials tests.
const authBackoff = 400 * time.Millisecond

// wantAuthBackoff runs a bridge with authBackoff against f, which refuses
// its first attempt (refusal names how, for the message), and checks that
// the retry waited the auth backoff. It returns the bridge's logs.
func wantAuthBackoff(t *testing.T, f *fakeBrokerForTest, refusal string) *logSink {
	t.Helper()
	_, logs := brokerBridge(t, f, bridge.Config{AuthBackoff: authBackoff}, nil)
	first := recv(t, f.attempts, "the first attempt")
	second := recv(t, f.attempts, "the second attempt")
	f.accept(t)
	if gap := second.at.Sub(first.at); gap < authBackoff/2 {
		t.Errorf("retried %v after %s, want at least %v", gap, refusal, authBackoff/2)
	}
	return logs
}

func TestClientConnectErrorUnauthorizedBacksOffLong(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	f.answer = func(n int) string {
		if n == 1 {
			return `4{"message":"bad token","data":{"code":"unauthorized"}}`
		}
		return ""
	}
	logs := wantAuthBackoff(t, f, "unauthorized")
	logs.waitFor(t, `"code":"unauthorized"`)
	logs.waitFor(t, "check the token")
}

func TestClientUpgradeRefusedWith403BacksOffLong(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	f.upgrade = func(n int) int {
		if n == 1 {
			return http.StatusForbidden
		}
		return 0
	}
	logs := wantAuthBackoff(t, f, "403")
	logs.waitFor(t, `"code":"forbidden"`)
}

func TestClientConnectErrorOtherCodeRetriesWithNormalBackoff(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	f.answer = func(n int) string {
		if n == 1 {
			return `4"try later"`
		}
		return ""
	}
	// With a one-minute auth backoff, reaching the second connection within
	// the test's wait limit proves the ordinary backoff was used.
	_, logs := brokerBridge(t, f, bridge.Config{AuthBackoff: time.Minute}, nil)
	f.accept(t)
	logs.waitFor(t, "try later")
}

// replacedBackoff is the Config.ReplacedBackoff of the replaced tests.
const replacedBackoff = 400 * time.Millisecond

// replacedSetup connects a bridge with replacedBackoff to a fake broker
// and returns the broker's side of the first connection.
func replacedSetup(t *testing.T) (*fakeBrokerForTest, *logSink, *fakeConnForTest) {
	t.Helper()
	f := newFakeBroker(t, protocol.OpenInfo{})
	_, logs := brokerBridge(t, f, bridge.Config{ReplacedBackoff: replacedBackoff}, nil)
	c1 := f.accept(t)
	recv(t, f.attempts, "the first attempt")
	return f, logs, c1
}

// wantReplacedBackoff checks that the bridge replaced at gone waited the
// replaced backoff before it reconnected, and said why.
func wantReplacedBackoff(t *testing.T, f *fakeBrokerForTest, logs *logSink, gone time.Time) {
	t.Helper()
	second := recv(t, f.attempts, "the reconnect")
	f.accept(t)
	if gap := second.at.Sub(gone); gap < replacedBackoff/2 {
		t.Errorf("reconnected %v after being replaced, want at least %v", gap, replacedBackoff/2)
	}
	logs.waitFor(t, "took over this workspace")
}

func TestClientReplacedDisconnectReconnectsAfterBackoff(t *testing.T) {
	f, logs, c1 := replacedSetup(t)
	c1.send(t, "41")
	gone := time.Now()
	_ = c1.ws.Close(websocket.StatusNormalClosure, "replaced")

	wantReplacedBackoff(t, f, logs, gone)
}

func TestClientReplacedReasonInDisconnectPacket(t *testing.T) {
	f, logs, c1 := replacedSetup(t)
	// Not standard Socket.IO (DISCONNECT has no payload), tolerated because
	// it is the obvious way for a broker to say why. The fake keeps the
	// socket open: the bridge must close it itself.
	c1.send(t, `41{"reason":"replaced"}`)
	gone := time.Now()
	c1.waitClosed(t)
	wantReplacedBackoff(t, f, logs, gone)
}

func TestClientReplacedAnnouncedByDisconnectReasonEvent(t *testing.T) {
	f, logs, c1 := replacedSetup(t)
	// What the tether broker sends: the reason as an event, then a bare
	// DISCONNECT, then a close frame that says nothing.
	c1.send(t, `42["disconnect_reason",{"reason":"replaced"}]`)
	c1.send(t, "41")
	gone := time.Now()
	_ = c1.ws.Close(websocket.StatusNormalClosure, "")
	wantReplacedBackoff(t, f, logs, gone)
}

func TestClientPlainDisconnectReconnects(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	_, logs := brokerBridge(t, f, bridge.Config{}, nil)
	c1 := f.accept(t)
	c1.send(t, "41")
	_ = c1.ws.Close(websocket.StatusNormalClosure, "")
	c2 := f.accept(t)
	c2.call(t, 1, pingCall("p"))
	_, resp := c2.response(t)
	wantSuccess(t, resp, `{"id":"p"}`)
	logs.waitFor(t, "broker sent DISCONNECT")
}

// waitRoute returns a mount for /api/test/wait, a handler that closes
// started, waits for its ctx to end and sends ctx's error on cause.
func waitRoute() (mount func(*bridge.Router), started chan struct{}, cause chan error) {
	started, cause = make(chan struct{}), make(chan error, 1)
	return func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/wait", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			close(started)
			<-ctx.Done()
			cause <- ctx.Err()
			return struct{}{}, ctx.Err()
		})
	}, started, cause
}

func TestClientToolCancelCancelsHandler(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	mount, started, cause := waitRoute()
	brokerBridge(t, f, bridge.Config{}, mount)
	c := f.accept(t)
	c.call(t, 4, protocol.ToolCall{CorrelationID: "to-cancel", Endpoint: "/api/test/wait", Timeout: 30})
	recv(t, started, "the handler to start")
	c.cancel(t, "to-cancel", "caller gone")
	if err := recv(t, cause, "the handler ctx to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx error = %v, want context.Canceled", err)
	}
	ack, resp := c.response(t)
	if ack != 4 {
		t.Errorf("ack id = %d, want 4", ack)
	}
	wantFailure(t, resp, protocol.CodeCancelled)
	if !strings.Contains(resp.Message, "caller gone") {
		t.Errorf("message = %q, want the cancel reason", resp.Message)
	}
}

func TestClientToolCancelForUnknownCallIsIgnored(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	brokerBridge(t, f, bridge.Config{}, nil)
	c := f.accept(t)
	c.cancel(t, "never-sent", "timeout")
	c.call(t, 1, pingCall("after"))
	_, resp := c.response(t)
	wantSuccess(t, resp, `{"id":"after"}`)
}

func TestClientHandlerTimeoutArrivesBeforeBrokerDeadline(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	g := newGate()
	defer g.open()
	brokerBridge(t, f, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/stuck", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			<-g.ch
			return struct{}{}, nil
		})
	})
	c := f.accept(t)
	const timeout = time.Second
	sent := time.Now()
	c.call(t, 9, protocol.ToolCall{CorrelationID: "slow", Endpoint: "/api/test/stuck", Timeout: timeout.Seconds()})
	ack, resp := c.response(t)
	if d := time.Since(sent); d >= timeout {
		t.Errorf("handler_timeout reached the broker after %v, want before its %v deadline", d, timeout)
	}
	if ack != 9 {
		t.Errorf("ack id = %d, want 9", ack)
	}
	wantFailure(t, resp, protocol.CodeHandlerTimeout)
}

func TestClientCancelsHandlersAndDropsResponsesWhenConnectionDrops(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	mount, started, cause := waitRoute()
	_, logs := brokerBridge(t, f, bridge.Config{}, mount)
	c1 := f.accept(t)
	c1.call(t, 1, protocol.ToolCall{CorrelationID: "orphan", Endpoint: "/api/test/wait", Timeout: 30})
	recv(t, started, "the handler to start")
	_ = c1.ws.CloseNow()
	if err := recv(t, cause, "the handler ctx to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx error = %v, want context.Canceled", err)
	}
	logs.waitFor(t, "response dropped: broker connection lost")
	// The next connection starts clean: no stale response shows up on it.
	c2 := f.accept(t)
	c2.call(t, 2, pingCall("fresh"))
	ack, resp := c2.response(t)
	if ack != 2 || resp.CorrelationID != "fresh" {
		t.Errorf("first frame on the new connection answers %d/%q, want 2/fresh", ack, resp.CorrelationID)
	}
}

// blockRoute returns a mount for /api/test/block, a handler that closes
// started and returns once g opens.
func blockRoute(g *gate) (mount func(*bridge.Router), started chan struct{}) {
	started = make(chan struct{})
	return func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/block", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			close(started)
			<-g.ch
			return struct{}{}, nil
		})
	}, started
}

func TestClientOverloadedOverSocket(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	g := newGate()
	defer g.open()
	mount, started := blockRoute(g)
	brokerBridge(t, f, bridge.Config{MaxInFlight: 1}, mount)
	c := f.accept(t)
	c.call(t, 1, protocol.ToolCall{CorrelationID: "busy", Endpoint: "/api/test/block", Timeout: 30})
	recv(t, started, "the handler to start")
	c.call(t, 2, pingCall("extra"))
	ack, resp := c.response(t)
	if ack != 2 {
		t.Fatalf("first answer is for ack %d, want the overloaded call 2", ack)
	}
	wantFailure(t, resp, protocol.CodeOverloaded)
	g.open()
	ack, resp = c.response(t)
	if ack != 1 {
		t.Fatalf("answer for ack %d, want 1", ack)
	}
	wantSuccess(t, resp, `{}`)
}

func TestClientDuplicateCorrelationIDAnswersInvalidPayload(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	g := newGate()
	defer g.open()
	mount, started := blockRoute(g)
	brokerBridge(t, f, bridge.Config{}, mount)
	c := f.accept(t)
	c.call(t, 1, protocol.ToolCall{CorrelationID: "same", Endpoint: "/api/test/block", Timeout: 30})
	recv(t, started, "the handler to start")
	c.call(t, 2, protocol.ToolCall{CorrelationID: "same", Endpoint: "/api/test/block", Timeout: 30})
	ack, resp := c.response(t)
	if ack != 2 {
		t.Fatalf("first answer is for ack %d, want the duplicate 2", ack)
	}
	wantFailure(t, resp, protocol.CodeInvalidPayload)
	g.open()
	if ack, _ := c.response(t); ack != 1 {
		t.Fatalf("answer for ack %d, want 1", ack)
	}
}

func TestClientCorrelationIDReusableOnceAnswered(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	brokerBridge(t, f, bridge.Config{}, nil)
	c := f.accept(t)
	// Sent again the moment its answer arrives, the same id is a new call.
	for i := int64(1); i <= 2000; i++ {
		c.call(t, i, protocol.ToolCall{CorrelationID: "again", Endpoint: "/api/ping", Timeout: 5})
		ack, resp := c.response(t)
		if ack != i || !resp.Success {
			t.Fatalf("call %d: ack %d, %+v", i, ack, resp)
		}
	}
}

func TestClientIgnoresMalformedPackets(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	_, logs := brokerBridge(t, f, bridge.Config{}, nil)
	c := f.accept(t)
	for _, frame := range []string{"", "x", "9", "4", "4x", "42[", "42{}", `42"x"`, "43[]", "4/other,2[\"tool_call\",{}]", `42["no_such_event",{}]`, "45", `451-["tool_call",{"_placeholder":true,"num":7}]`} {
		c.send(t, frame)
	}
	c.sendBinary(t, []byte{0xff, 0x00})
	// Calls that cannot be read still get their one answer, by ack.
	c.send(t, `425["tool_call"]`)
	c.send(t, `426["tool_call","not an object"]`)
	c.send(t, `427["tool_call",{"endpoint":"/api/ping","timeout":5}]`)
	c.send(t, `428["tool_call",{"correlation_id":"bad-timeout","endpoint":"/api/ping","timeout":"soon"}]`)
	for want := int64(5); want <= 8; want++ {
		ack, resp := c.response(t)
		if ack != want {
			t.Fatalf("answer for ack %d, want %d", ack, want)
		}
		wantFailure(t, resp, protocol.CodeInvalidPayload)
		if want == 8 && resp.CorrelationID != "bad-timeout" {
			t.Errorf("correlation_id = %q, want the one the broken call carried", resp.CorrelationID)
		}
	}
	// The connection survived all of it.
	c.call(t, 10, pingCall("still-here"))
	ack, resp := c.response(t)
	if ack != 10 {
		t.Fatalf("answer for ack %d, want 10", ack)
	}
	wantSuccess(t, resp, `{"id":"still-here"}`)
	if len(f.conns) != 0 || len(f.attempts) != 1 {
		t.Errorf("the bridge reconnected after malformed packets")
	}
	logs.waitFor(t, "malformed packet from broker ignored")
}

func TestClientExactlyOneResponsePerCall(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	brokerBridge(t, f, bridge.Config{MaxInFlight: 8}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/panic", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			panic("boom")
		})
		bridge.Handle(r, "/api/test/wait", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			<-ctx.Done()
			return struct{}{}, ctx.Err()
		})
		bridge.Handle(r, "/api/test/add", func(_ context.Context, _ *bridge.Call, req addRequest) (addResponse, error) {
			return addResponse{Sum: req.A + req.B}, nil
		})
	})
	c := f.accept(t)
	const n = 200
	kinds := []protocol.ToolCall{
		{Endpoint: protocol.PingEndpoint, Payload: json.RawMessage(`{}`)},
		{Endpoint: "/api/test/panic"},
		{Endpoint: "/api/nope"},
		{Endpoint: "/api/test/add", Payload: json.RawMessage(`{"a":"x"}`)},
		{Endpoint: "/api/test/add", Payload: json.RawMessage(`{"a":1,"b":2}`)},
		{Endpoint: "/api/test/wait", Timeout: 0.1},
	}
	for i := range n {
		call := kinds[i%len(kinds)]
		call.CorrelationID = fmt.Sprintf("c%d", i)
		if call.Timeout == 0 {
			call.Timeout = 10
		}
		c.call(t, int64(i), call)
	}
	seen := map[int64]int{}
	for range n {
		ack, resp := c.response(t)
		seen[ack]++
		if want := fmt.Sprintf("c%d", ack); resp.CorrelationID != want {
			t.Errorf("ack %d carries correlation_id %q, want %q", ack, resp.CorrelationID, want)
		}
	}
	for i := range int64(n) {
		if seen[i] != 1 {
			t.Errorf("call %d answered %d times", i, seen[i])
		}
	}
	// Nothing else is on its way: the next frame answers a fresh marker call.
	c.call(t, n, pingCall("marker"))
	if ack, _ := c.response(t); ack != n {
		t.Errorf("after %d answers, got an extra one for ack %d", n, ack)
	}
}

func TestClientReadLimitFollowsMaxPayload(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{MaxPayload: 1000})
	brokerBridge(t, f, bridge.Config{}, nil)
	c1 := f.accept(t)
	// Far beyond maxPayload plus any envelope slack: the bridge must refuse
	// it rather than buffer it, and start over.
	big := protocol.ToolCall{CorrelationID: "big", Endpoint: protocol.PingEndpoint,
		Payload: json.RawMessage(`"` + strings.Repeat("a", 200_000) + `"`), Timeout: 5}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The bridge may close the socket mid-frame; that is the point.
	_ = c1.ws.Write(ctx, websocket.MessageText, protocol.EncodeEvent(1, protocol.EventToolCall, mustJSON(t, big)))
	c1.waitClosed(t)
	f.accept(t)
}

func TestClientResponseOverMaxPayloadAnswersPayloadTooLarge(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{MaxPayload: 1000})
	brokerBridge(t, f, bridge.Config{}, nil)
	c := f.accept(t)
	payload := `"` + strings.Repeat("a", 3000) + `"`
	c.call(t, 1, protocol.ToolCall{CorrelationID: "echo-big", Endpoint: protocol.PingEndpoint, Payload: json.RawMessage(payload), Timeout: 5})
	ack, resp := c.response(t)
	if ack != 1 || resp.CorrelationID != "echo-big" {
		t.Fatalf("answer %d/%q, want 1/echo-big", ack, resp.CorrelationID)
	}
	wantFailure(t, resp, protocol.CodePayloadTooLarge)
}

func TestClientShutdownSendsDisconnect(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	b, err := bridge.New(bridge.Config{BrokerURL: f.url(), WorkspaceID: "w", Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	c := f.accept(t)
	recv(t, b.Connected(), "Connected")
	cancel()
	if got := c.next(t); got != "41" {
		t.Errorf("frame on shutdown = %q, want DISCONNECT 41", got)
	}
	c.waitClosed(t)
	if err := recv(t, done, "Run to return"); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func TestRunTwiceFails(t *testing.T) {
	b, err := bridge.New(bridge.Config{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Run(ctx); err != nil {
		t.Fatalf("first Run = %v, want nil after cancel", err)
	}
	if err := b.Run(ctx); err == nil {
		t.Error("second Run succeeded")
	}
}

// TestClientBlockedHandlerDoesNotHoldUpTheSocket: calls run on the reading
// goroutine until one blocks; then reading moves on, so later calls are
// answered and a tool_cancel reaches the blocked handler.
func TestClientBlockedHandlerDoesNotHoldUpTheSocket(t *testing.T) {
	f := newFakeBroker(t, protocol.OpenInfo{})
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	brokerBridge(t, f, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/block", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			close(started)
			<-ctx.Done()
			cancelled <- context.Cause(ctx)
			return struct{}{}, ctx.Err()
		})
	})
	c := f.accept(t)
	c.call(t, 1, protocol.ToolCall{CorrelationID: "stuck", Endpoint: "/api/test/block", Timeout: 60})
	recv(t, started, "the handler to start")
	start := time.Now()
	for i := int64(2); i <= 11; i++ {
		c.call(t, i, pingCall(fmt.Sprintf("p%d", i)))
		ack, resp := c.response(t)
		if ack != i {
			t.Fatalf("answer for ack %d, want %d", ack, i)
		}
		wantSuccess(t, resp, fmt.Sprintf(`{"id":"p%d"}`, i))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("10 pings behind a blocked handler took %v", took)
	}
	c.cancel(t, "stuck", "caller gone")
	select {
	case err := <-cancelled:
		if err == nil || !strings.Contains(err.Error(), "caller gone") {
			t.Fatalf("handler context ended with %v; want the broker's cancel", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tool_cancel did not reach the blocked handler")
	}
	ack, resp := c.response(t)
	if ack != 1 {
		t.Fatalf("answer for ack %d, want 1", ack)
	}
	if resp.Success {
		t.Fatalf("cancelled call answered success: %+v", resp)
	}
}
