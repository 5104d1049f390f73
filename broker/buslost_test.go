package broker_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// lostEnv is a broker on a bus the test shares (a plainBus: calls go
// through the bus, as on Redis), holding ws through c, whose bus connection
// was just lost (BusLost); a call to ws has come since, which the holder
// keeps. Its answer comes on first.
type lostEnv struct {
	*env
	bus   *bus.Memory
	ws    string
	c     *wireClient
	first <-chan callResult
}

func startBusLost(t *testing.T, ws, timeout string) *lostEnv {
	t.Helper()
	m := bus.NewMemory()
	t.Cleanup(func() { _ = m.Close() })
	e := newEnv(t, func(c *broker.Config) { c.Bus = plainBus{m} })
	l := &lostEnv{env: e, bus: m, ws: ws, c: e.connect(ws, e.token(auth.RoleBridge, ws))}
	e.waitHandsOver(ws)
	e.broker.BusLost()
	if broker.HandsOverForTest(e.broker, ws) {
		t.Fatal("the holder still takes calls after BusLost")
	}
	l.first = l.ping(1, "timeout", timeout)
	l.waitKept(1)
	return l
}

func (l *lostEnv) ping(n int, timeoutField, timeout string) <-chan callResult {
	return l.goCall(l.ws, l.token(auth.RoleCaller, l.ws), `{"endpoint":"/api/ping","payload":{"n":`+strconv.Itoa(n)+`},"`+timeoutField+`":`+timeout+`}`)
}

// waitKept waits until the holder keeps n calls.
func (l *lostEnv) waitKept(n int) {
	l.t.Helper()
	testwait.Until(l.t, 5*time.Second, func() bool { return broker.KeptCallsForTest(l.broker, l.ws) == n }, "the holder to keep %d calls", n)
}

// otherHolder subscribes the workspace channel as a holder on another
// broker would and returns what it hears there.
func (l *lostEnv) otherHolder() <-chan protocol.BusMessage {
	heard := make(chan protocol.BusMessage, 64)
	sub, err := l.bus.Subscribe(context.Background(), protocol.WorkspaceChannel(l.ws), func(msg []byte) {
		var m protocol.BusMessage
		if protocol.DecodeBusMessage(msg, &m) == nil && m.Type != protocol.BusCall {
			heard <- m
		}
	})
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { _ = sub.Unsubscribe(context.Background()) })
	return heard
}

func (l *lostEnv) publish(m protocol.BusMessage) {
	l.t.Helper()
	msg, _ := json.Marshal(m)
	if _, err := l.bus.Publish(context.Background(), protocol.WorkspaceChannel(l.ws), msg); err != nil {
		l.t.Fatal(err)
	}
}

// hear returns the next message of type typ heard (the other holder hears
// what it publishes itself too).
func hear(t *testing.T, heard <-chan protocol.BusMessage, typ string) protocol.BusMessage {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-heard:
			if m.Type == typ {
				return m
			}
		case <-timeout:
			t.Fatalf("heard no %s in 5 s", typ)
		}
	}
}

// retakeShared has the holder take its workspace again while another
// holder listens: it returns what that holder hears, the takeover it heard
// and the answer of a second call sent after the takeover (timeout as
// given), which the holder keeps; the first kept call is dropped then (the
// other holder's).
func (l *lostEnv) retakeShared(timeout string) (<-chan protocol.BusMessage, protocol.BusMessage, <-chan callResult) {
	l.t.Helper()
	heard := l.otherHolder()
	l.broker.Reannounce()
	tk := hear(l.t, heard, protocol.BusTakeover)
	second := l.ping(2, "timeout", timeout)
	l.waitKept(1)
	return heard, tk, second
}

// TestBusLostHolderDeliversWhatItKeptOnceItTookTheWorkspaceAlone: after the
// bus came back the holder takes its workspace again; nobody else heard
// that takeover, so the call it kept is its own and is delivered.
func TestBusLostHolderDeliversWhatItKeptOnceItTookTheWorkspaceAlone(t *testing.T) {
	l := startBusLost(t, "ws-lost", "5")
	l.broker.Reannounce()
	r := l.c.nextCall()
	if string(r.call.Payload) != `{"n":1}` {
		t.Fatalf("delivered %+v", r.call)
	}
	l.c.ackOK(r, `"ok"`)
	if res := awaitResult(t, l.first, 5*time.Second); !res.resp.Success {
		t.Fatalf("call answered %+v", res.resp)
	}
	l.waitHandsOver(l.ws)
}

// TestBusLostHolderWaitsForAnOlderHolderToYield: an older holder (on a
// broker that never lost the bus) heard the takeover: the call kept before
// it was that holder's and is not delivered here (it ends timeout, that
// holder never answering here); the call after it is kept until the older
// holder yields, then delivered.
func TestBusLostHolderWaitsForAnOlderHolderToYield(t *testing.T) {
	l := startBusLost(t, "ws-older", "1")
	_, tk, second := l.retakeShared("5")
	if broker.HandsOverForTest(l.broker, l.ws) {
		t.Fatal("the holder takes calls before the older holder yielded")
	}
	l.publish(protocol.BusMessage{Type: protocol.BusYield, Holder: "older", Since: 1, Reason: tk.Holder})
	r := l.c.nextCall()
	if string(r.call.Payload) != `{"n":2}` {
		t.Fatalf("delivered %s first, want the call after the takeover", r.call.Payload)
	}
	l.c.ackOK(r, `"ok"`)
	if res := awaitResult(t, second, 5*time.Second); !res.resp.Success {
		t.Fatalf("the call after the takeover answered %+v", res.resp)
	}
	if res := awaitResult(t, l.first, 5*time.Second); res.resp.Error != protocol.CodeTimeout {
		t.Fatalf("the call kept before the takeover answered %+v, want timeout", res.resp)
	}
	l.waitHandsOver(l.ws)
}

// TestBusLostHolderYieldsToANewerHolder: a newer connection took the
// workspace on another broker while this one's bus was down; it reasserts
// on hearing the older takeover, and this holder yields (says so) and
// delivers nothing it kept: the newest connection keeps the workspace.
func TestBusLostHolderYieldsToANewerHolder(t *testing.T) {
	l := startBusLost(t, "ws-newer", "1")
	heard, _, second := l.retakeShared("1")
	l.publish(protocol.BusMessage{Type: protocol.BusTakeover, Holder: "newer", Since: time.Now().Add(time.Hour).UnixNano()})
	if y := hear(t, heard, protocol.BusYield); y.Reason != "newer" {
		t.Fatalf("yielded %+v, want a yield to the newer holder", y)
	}
	l.c.waitClosed(5 * time.Second)
	for _, ch := range []<-chan callResult{l.first, second} {
		if res := awaitResult(t, ch, 5*time.Second); res.resp.Error != protocol.CodeTimeout {
			t.Fatalf("a kept call answered %+v, want timeout: it was the newer holder's", res.resp)
		}
	}
}

// TestBusLostHolderThatHearsNoAnswerDisconnects: another subscriber heard
// the takeover and neither yields nor reasserts: after rejoinWait (3 s)
// the holder disconnects its client, which connects again afresh.
func TestBusLostHolderThatHearsNoAnswerDisconnects(t *testing.T) {
	l := startBusLost(t, "ws-silent", "1")
	l.otherHolder()
	start := time.Now()
	l.broker.Reannounce()
	l.c.waitClosed(5 * time.Second)
	if el := time.Since(start); el < 2900*time.Millisecond {
		t.Fatalf("disconnected after %s, before the 3 s wait", el)
	}
	if res := awaitResult(t, l.first, 5*time.Second); res.resp.Error != protocol.CodeTimeout {
		t.Fatalf("the kept call answered %+v, want timeout", res.resp)
	}
}
