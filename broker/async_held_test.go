package broker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// gatedStore is the real in-memory store with a count of its Claim and
// CreateHeld calls and, when set, gates that stop them: the tests hold a
// call between the store step and the delivery to reach the races there.
type gatedStore struct {
	store.Store
	claims, helds atomic.Int32
	// claimGate, when set, is waited on before a Claim runs;
	// heldGate after a CreateHeld ran. Each signals entered first.
	claimGate, heldGate chan struct{}
	entered             chan struct{}
}

func newGatedStore(t *testing.T) *gatedStore {
	s := &gatedStore{Store: store.NewMemory(store.Options{}), entered: make(chan struct{}, 16)}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (s *gatedStore) Claim(ctx context.Context, ws string, now time.Time, max int) ([]store.Record, error) {
	s.claims.Add(1)
	if s.claimGate != nil {
		s.entered <- struct{}{}
		<-s.claimGate
	}
	return s.Store.Claim(ctx, ws, now, max)
}

func (s *gatedStore) CreateHeld(ctx context.Context, rec store.Record) (store.Created, error) {
	s.helds.Add(1)
	created, err := s.Store.CreateHeld(ctx, rec)
	if s.heldGate != nil {
		s.entered <- struct{}{}
		<-s.heldGate
	}
	return created, err
}

func (s *gatedStore) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the store step was not reached")
	}
}

// waitHandsOver waits until a submit for ws would be handed to the
// connection holding it: that connection drains its (empty) queue when it
// takes the workspace, and a submit during that drain is queued behind it.
// The broker's own condition is polled: no event says a drain ended.
func (e *env) waitHandsOver(ws string) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !broker.HandsOverForTest(e.broker, ws) {
		if time.Now().After(deadline) {
			e.t.Fatalf("the connection holding %s did not end its connect-time drain in 5 s", ws)
		}
		time.Sleep(time.Millisecond)
	}
}

func newHeldEnv(t *testing.T, st *gatedStore) *env {
	return newEnv(t, func(c *broker.Config) { c.Store = st })
}

// submitAsync submits body to ws in the background; the record comes on
// the channel (an empty one when the submit was not answered 202).
func (e *env) submitAsync(ws, token, body string) <-chan store.Record {
	out := make(chan store.Record, 1)
	go func() {
		status, _, raw := e.apiRequest(http.MethodPost, "/api/v1/workspaces/"+ws+"/calls", token, body)
		var rec store.Record
		if status == http.StatusAccepted {
			_ = json.Unmarshal(raw, &rec)
		}
		out <- rec
	}()
	return out
}

func TestAsyncSubmitToAHeldWorkspaceIsDeliveredWithoutTheQueue(t *testing.T) {
	st := newGatedStore(t)
	e := newHeldEnv(t, st)
	c := e.connect("ws-h", e.token(broker.RoleBridge, "ws-h"))
	tok := e.token(broker.RoleCaller, "ws-h")
	e.waitHandsOver("ws-h")
	claims := st.claims.Load()
	rec, _ := e.submit("ws-h", tok, `{"endpoint":"/x","payload":{"n":1},"timeout":5,"async":true}`, http.StatusAccepted)
	if rec.Status != store.Delivered || rec.DeliveredAt == nil {
		t.Fatalf("submit to a held workspace answered %+v, want delivered", rec)
	}
	r := c.nextCall()
	if r.call.CorrelationID != rec.CorrelationID || string(r.call.Payload) != `{"n":1}` {
		t.Fatalf("client got %+v", r.call)
	}
	c.ackOK(r, `"ok"`)
	if _, got, _ := e.callStatus(rec.CorrelationID, tok, "?wait=5"); got.Status != store.Succeeded || string(got.Response.Result) != `"ok"` {
		t.Fatalf("outcome %+v", got)
	}
	if n := st.claims.Load(); n != claims || st.helds.Load() != 1 {
		t.Fatalf("claims %d → %d, held creates %d: want the call handed over without a claim", claims, n, st.helds.Load())
	}
}

func TestAsyncSubmitDuringADrainKeepsTheQueueOrder(t *testing.T) {
	st := newGatedStore(t)
	st.claimGate = make(chan struct{})
	e := newHeldEnv(t, st)
	tok := e.token(broker.RoleCaller, "ws-o")
	var ids []string
	for _, ep := range []string{"/first", "/second"} {
		rec, _ := e.submit("ws-o", tok, `{"endpoint":"`+ep+`","timeout":10,"async":true,"wait_for_workspace_ms":5000}`, http.StatusAccepted)
		ids = append(ids, rec.CorrelationID)
	}
	c := e.connect("ws-o", e.token(broker.RoleBridge, "ws-o"))
	st.waitEntered(t) // the drain's claim is in flight: the queued calls come first
	third := e.submitAsync("ws-o", tok, `{"endpoint":"/third","timeout":10,"async":true}`)
	rec := <-third
	if rec.CorrelationID == "" {
		t.Fatal("third submit refused")
	}
	ids = append(ids, rec.CorrelationID)
	close(st.claimGate)
	for i, want := range ids {
		if r := c.nextCall(); r.call.CorrelationID != want {
			t.Fatalf("call %d delivered %s (%s), want %s: submit order", i, r.call.CorrelationID, r.call.Endpoint, want)
		}
	}
}

// heldSubmit is an async submit to a workspace the broker holds, stopped
// after the store recorded it delivered and before it reaches the
// connection (the store's heldGate, closed by the test).
type heldSubmit struct {
	st  *gatedStore
	e   *env
	c   *wireClient
	tok string
	sub <-chan store.Record
}

// startHeldSubmit connects a client for ws, waits until a submit would be
// handed to it, submits the call cid and waits for the gate.
func startHeldSubmit(t *testing.T, ws, cid string) heldSubmit {
	t.Helper()
	h := heldSubmit{st: newGatedStore(t)}
	h.st.heldGate = make(chan struct{})
	h.e = newHeldEnv(t, h.st)
	h.c = h.e.connect(ws, h.e.token(broker.RoleBridge, ws))
	h.tok = h.e.token(broker.RoleCaller, ws)
	h.e.waitHandsOver(ws)
	h.sub = h.e.submitAsync(ws, h.tok, `{"endpoint":"/x","timeout":10,"async":true,"correlation_id":"`+cid+`"}`)
	h.st.waitEntered(t) // recorded delivered, not yet on the connection
	return h
}

func TestAsyncHeldCallWhoseConnectionWentFailsOnce(t *testing.T) {
	h := startHeldSubmit(t, "ws-g", "held-gone")
	st, e, c, tok, sub := h.st, h.e, h.c, h.tok, h.sub
	_ = c.ws.CloseNow()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.broker.Workspaces()) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if len(e.broker.Workspaces()) > 0 {
		t.Fatal("the broker still holds the workspace")
	}
	close(st.heldGate)
	if rec := <-sub; rec.Status != store.Delivered {
		t.Fatalf("submit answered %+v", rec)
	}
	_, got, _ := e.callStatus("held-gone", tok, "?wait=5")
	if got.Status != store.Failed || got.Response == nil || got.Response.Error != protocol.CodeWorkspaceDisconnected {
		t.Fatalf("outcome %+v %+v, want failed workspace_disconnected", got, got.Response)
	}
}

func TestAsyncCancelBeforeTheHeldCallIsDeliveredStopsIt(t *testing.T) {
	h := startHeldSubmit(t, "ws-k", "held-cancel")
	st, e, c, tok, sub := h.st, h.e, h.c, h.tok, h.sub
	if status, got := e.cancelCall("held-cancel", tok); status != http.StatusOK || got.Status != store.Cancelled {
		t.Fatalf("cancel: HTTP %d %+v", status, got)
	}
	close(st.heldGate)
	<-sub
	r := c.nextCall()
	if r.call.CorrelationID != "held-cancel" {
		t.Fatalf("client got %+v", r.call)
	}
	name, _, arg := c.nextEvent()
	var tc protocol.ToolCancel
	_ = json.Unmarshal(arg, &tc)
	if name != protocol.EventToolCancel || tc.CorrelationID != "held-cancel" {
		t.Fatalf("client got %s %s after the call, want its tool_cancel", name, arg)
	}
	c.ackOK(r, `"late"`)
	if _, got, _ := e.callStatus("held-cancel", tok, ""); got.Status != store.Cancelled {
		t.Fatalf("after the late answer: %+v", got)
	}
}
