package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/protocol"
)

// lostEnv is a broker on a bus the test shares (a plainBus: calls go
// through the bus, as on Redis), holding ws through c, whose bus connection
// was just lost (BusLost) and a call to ws has come since: the holder keeps
// it. The call's answer comes on call.
type lostEnv struct {
	*env
	bus  *bus.Memory
	c    *wireClient
	call <-chan callResult
}

func startBusLost(t *testing.T, ws, timeout string) lostEnv {
	t.Helper()
	m := bus.NewMemory()
	t.Cleanup(func() { _ = m.Close() })
	e := newEnv(t, func(c *broker.Config) { c.Bus = plainBus{m} })
	l := lostEnv{env: e, bus: m, c: e.connect(ws, e.token(broker.RoleBridge, ws))}
	e.waitHandsOver(ws)
	e.broker.BusLost()
	if broker.HandsOverForTest(e.broker, ws) {
		t.Fatal("the holder still takes calls after BusLost")
	}
	l.call = e.goCall(ws, e.token(broker.RoleCaller, ws), `{"endpoint":"/api/ping","payload":{"n":1},"timeout":`+timeout+`}`)
	deadline := time.Now().Add(5 * time.Second)
	for broker.EarlyCallsForTest(e.broker, ws) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the call did not reach the holder in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	return l
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
	if res := awaitResult(t, l.call, 5*time.Second); !res.resp.Success {
		t.Fatalf("call answered %+v", res.resp)
	}
	l.waitHandsOver("ws-lost")
}

// TestBusLostHolderLeavesWhatItKeptToAnotherHolder: another holder was
// subscribed when the holder took its workspace again (a connection on
// another broker that took it while this broker's bus was down, which this
// broker never heard of): the call kept meanwhile reached that holder too,
// so it is not delivered here; the ones after the takeover are. The call
// left to the other holder, which never answers here, ends timeout.
func TestBusLostHolderLeavesWhatItKeptToAnotherHolder(t *testing.T) {
	l := startBusLost(t, "ws-shared", "1")
	heard := make(chan protocol.BusMessage, 16)
	other, err := l.bus.Subscribe(context.Background(), protocol.WorkspaceChannel("ws-shared"), func(msg []byte) {
		var m protocol.BusMessage
		if protocol.DecodeBusMessage(msg, &m) == nil {
			heard <- m
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	l.broker.Reannounce()
	select {
	case m := <-heard:
		if m.Type != protocol.BusTakeover {
			t.Fatalf("the other holder heard %+v, want the takeover", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the other holder heard no takeover")
	}
	_ = other.Unsubscribe(context.Background()) // it yields
	l.waitHandsOver("ws-shared")
	next := l.goCall("ws-shared", l.token(broker.RoleCaller, "ws-shared"), `{"endpoint":"/api/ping","payload":{"n":2},"timeout":5}`)
	r := l.c.nextCall()
	if string(r.call.Payload) != `{"n":2}` {
		t.Fatalf("delivered %s first, want the call after the takeover: the kept one was the other holder's", r.call.Payload)
	}
	l.c.ackOK(r, `"ok"`)
	if res := awaitResult(t, next, 5*time.Second); !res.resp.Success {
		t.Fatalf("call after the takeover answered %+v", res.resp)
	}
	if res := awaitResult(t, l.call, 5*time.Second); res.resp.Error != protocol.CodeTimeout {
		t.Fatalf("the kept call answered %+v, want timeout", res.resp)
	}
}
