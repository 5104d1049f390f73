package broker_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// A WebSocket whose client has been quiet for about a second parks: its
// reader goroutine ends and the poller starts one when the client sends.
// These tests watch the reader goroutines in this process's stacks.

// readerGoroutines counts the goroutines running a connection's read loop.
func readerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "eio.(*Session).readLoop(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitParked waits until no connection has a reader.
func waitParked(t *testing.T) {
	t.Helper()
	testwait.Until(t, 5*time.Second, func() bool { return readerGoroutines() == 0 }, "no connection to have a reader goroutine (quiet for 5s)")
}

func TestQuietConnectionsHoldNoGoroutineAndWakeForTheirClient(t *testing.T) {
	e := newEnv(t)
	workspaces := []string{"ws1", "ws2", "ws3"}
	clients := make([]*wireClient, len(workspaces))
	for i, ws := range workspaces {
		clients[i] = e.connect(ws, e.token(auth.RoleBridge, ws))
	}
	if readerGoroutines() == 0 {
		t.Fatal("no reader goroutine right after the handshakes")
	}
	waitParked(t)
	for i, ws := range workspaces {
		res := e.goCall(ws, e.token(auth.RoleCaller, ws), `{"endpoint":"/x","timeout":5}`)
		r := clients[i].nextCall() // written while parked: writes need no reader
		clients[i].ackOK(r, `"`+ws+`"`)
		if got := awaitResult(t, res, 5*time.Second); string(got.resp.Result) != `"`+ws+`"` {
			t.Fatalf("%s: got %+v", ws, got.resp)
		}
	}
	waitParked(t) // and again, after they talked
}

func TestParkedClientThatDropsGetsItsCallsAnsweredAtOnce(t *testing.T) {
	e := newEnv(t)
	c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	waitParked(t)
	res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","timeout":30}`)
	c.nextCall()
	start := time.Now()
	_ = c.ws.CloseNow()
	got := awaitResult(t, res, 2*time.Second)
	if got.resp.Error != protocol.CodeWorkspaceDisconnected {
		t.Fatalf("got %+v", got.resp)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("disconnect of a parked client answered after %s", el)
	}
}

func TestParkedClientAnsweringPingsStaysConnected(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) {
		c.PingInterval = 1500 * time.Millisecond
		c.PingTimeout = 500 * time.Millisecond
	})
	c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	waitParked(t)
	// Two pings, each answered while parked: the pong wakes the reader.
	testwait.Until(t, 10*time.Second, func() bool { return c.pings.Load() >= 3 }, "3 pings")
	res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","timeout":5}`)
	c.ackOK(c.nextCall(), `"still here"`)
	if got := awaitResult(t, res, 5*time.Second); string(got.resp.Result) != `"still here"` {
		t.Fatalf("got %+v", got.resp)
	}
}

func TestParkedConnectionReplacedGetsItsGoodbye(t *testing.T) {
	e := newEnv(t)
	tok := e.token(auth.RoleBridge, "ws1")
	old := e.connect("ws1", tok)
	waitParked(t)
	e.connect("ws1", tok)
	if f := string(old.next()); !strings.HasPrefix(f, `42["`+broker.EventDisconnectReason+`",`) || !strings.Contains(f, broker.ReasonReplaced) {
		t.Fatalf("first goodbye frame %q, want the disconnect_reason event", f)
	}
	if f := string(old.next()); f != "41" {
		t.Fatalf("second goodbye frame %q, want the DISCONNECT packet 41", f)
	}
	old.waitClosed(2 * time.Second)
}
