package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// gatedStore is the real in-memory store with a count of its Claim and
// CreateDelivered calls and, when set, gates that stop them: the tests hold a
// call between the store step and the delivery to reach the races there.
type gatedStore struct {
	store.Store
	claims, helds, creates, puts, finishes atomic.Int32
	// putErr, when set, is what a Put of a delivered call fails with.
	putErr error
	// claimGate, when set, is waited on before a Claim runs;
	// heldGate after a CreateDelivered ran. Each signals entered first.
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

func (s *gatedStore) CreateDelivered(ctx context.Context, rec store.Record) (store.Created, error) {
	s.helds.Add(1)
	created, err := s.Store.CreateDelivered(ctx, rec)
	if s.heldGate != nil {
		s.entered <- struct{}{}
		<-s.heldGate
	}
	return created, err
}

func (s *gatedStore) Create(ctx context.Context, rec store.Record) (store.Created, error) {
	s.creates.Add(1)
	return s.Store.Create(ctx, rec)
}

func (s *gatedStore) Put(ctx context.Context, rec store.Record) (store.Record, error) {
	s.puts.Add(1)
	if s.putErr != nil && rec.Status == store.Delivered {
		return store.Record{}, s.putErr
	}
	return s.Store.Put(ctx, rec)
}

func (s *gatedStore) Finish(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (store.Outcome, error) {
	s.finishes.Add(1)
	return s.Store.Finish(ctx, cid, resp, now)
}

// steps is what the store was asked to do so far.
func (s *gatedStore) steps() string {
	return fmt.Sprintf("creates %d, held creates %d, puts %d, finishes %d", s.creates.Load(), s.helds.Load(), s.puts.Load(), s.finishes.Load())
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
	testwait.Until(e.t, 5*time.Second, func() bool { return broker.HandsOverForTest(e.broker, ws) }, "the connection holding %s to end its connect-time drain", ws)
}

func newHeldEnv(t *testing.T, st *gatedStore) *env {
	return newEnv(t, func(c *broker.Config) { c.Store = st })
}

// heldClient connects a client for ws to a broker on st and waits until
// its connect-time drain has claimed and ended and a submit for ws is
// handed to it; it returns the broker, the client and a caller token for
// ws.
func heldClient(t *testing.T, st *gatedStore, ws string) (*env, *wireClient, string) {
	t.Helper()
	e := newHeldEnv(t, st)
	claims := st.claims.Load()
	c := e.connect(ws, e.token(auth.RoleBridge, ws))
	tok := e.token(auth.RoleCaller, ws)
	// The connection hands submits over from its CONNECT ack on, also
	// before its connect-time drain starts: wait for that drain's claim.
	testwait.Until(t, 5*time.Second, func() bool { return st.claims.Load() != claims }, "the connection holding %s to make its connect-time claim", ws)
	e.waitHandsOver(ws)
	return e, c, tok
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
	e, c, tok := heldClient(t, st, "ws-h")
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

// TestAsyncSubmitDuringADrainIsHandedOverAfterIt: a submit for a workspace
// whose connection is draining its queue (it does when it takes the
// workspace) waits for that drain, is then recorded delivered and handed
// over, and reaches the client behind the calls the drain delivered.
func TestAsyncSubmitDuringADrainIsHandedOverAfterIt(t *testing.T) {
	st := newGatedStore(t)
	st.claimGate = make(chan struct{})
	e := newEnv(t, func(c *broker.Config) { c.Store, c.SubmitDrainWait = st, time.Minute })
	ids, c := queueThenConnect(t, e, st, "ws-d")
	tok := e.token(auth.RoleCaller, "ws-d")
	third := e.submitAsync("ws-d", tok, `{"endpoint":"/third","timeout":10,"async":true}`)
	testwait.Until(t, 5*time.Second, func() bool { return broker.DrainWaitsForTest(e.broker) > 0 }, "the submit to wait for the drain")
	close(st.claimGate)
	rec := <-third
	if rec.Status != store.Delivered || rec.DeliveredAt == nil {
		t.Fatalf("submit during the drain answered %+v, want delivered; store: %s", rec, st.steps())
	}
	if st.creates.Load() != 2 || st.helds.Load() != 1 {
		t.Fatalf("store: %s; want the two queued calls created and the third handed over", st.steps())
	}
	wantOrder(t, c, append(ids, rec.CorrelationID))
}

// TestAsyncSubmitDuringALongDrainIsQueuedInOrder: a drain that outlasts
// the submit's wait for it (SubmitDrainWait) leaves the submit queued, and
// the call still reaches the client behind the calls queued before it.
func TestAsyncSubmitDuringALongDrainIsQueuedInOrder(t *testing.T) {
	st := newGatedStore(t)
	st.claimGate = make(chan struct{})
	e := newEnv(t, func(c *broker.Config) { c.Store, c.SubmitDrainWait = st, 20*time.Millisecond })
	ids, c := queueThenConnect(t, e, st, "ws-o")
	tok := e.token(auth.RoleCaller, "ws-o")
	start := time.Now()
	rec := <-e.submitAsync("ws-o", tok, `{"endpoint":"/third","timeout":10,"async":true}`)
	if rec.Status != store.Queued {
		t.Fatalf("submit during a drain longer than its wait answered %+v, want queued", rec)
	}
	if el := time.Since(start); el < 20*time.Millisecond || el > 2*time.Second {
		t.Fatalf("submit answered after %s, want after its 20 ms wait for the drain", el)
	}
	close(st.claimGate)
	wantOrder(t, c, append(ids, rec.CorrelationID))
}

// queueThenConnect submits two calls to ws while it is offline, then
// connects its client and returns once the connection's connect-time
// drain is in its claim (held at st's claim gate).
func queueThenConnect(t *testing.T, e *env, st *gatedStore, ws string) ([]string, *wireClient) {
	t.Helper()
	tok := e.token(auth.RoleCaller, ws)
	var ids []string
	for _, ep := range []string{"/first", "/second"} {
		rec, _ := e.submit(ws, tok, `{"endpoint":"`+ep+`","timeout":10,"async":true,"wait_for_workspace_ms":5000}`, http.StatusAccepted)
		ids = append(ids, rec.CorrelationID)
	}
	c := e.connect(ws, e.token(auth.RoleBridge, ws))
	st.waitEntered(t) // the drain's claim is in flight: the queued calls come first
	return ids, c
}

// wantOrder reads the calls c gets and requires them in the order of ids.
func wantOrder(t *testing.T, c *wireClient, ids []string) {
	t.Helper()
	for i, want := range ids {
		if r := c.nextCall(); r.call.CorrelationID != want {
			t.Fatalf("call %d delivered %s (%s), want %s: submit order", i, r.call.CorrelationID, r.call.Endpoint, want)
		}
	}
}

// onlineGatedBus holds a publish of a workspace coming online until gate
// is closed: the connection holding the workspace has taken it (its
// CONNECT is acknowledged) and not yet started its connect-time drain.
type onlineGatedBus struct {
	bus.Bus
	entered chan struct{}
	gate    chan struct{}
}

func (g *onlineGatedBus) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	if channel == protocol.OnlineChannel {
		g.entered <- struct{}{}
		<-g.gate
	}
	return g.Bus.Publish(ctx, channel, msg)
}

// TestAsyncSubmitBeforeTheConnectTimeDrainKeepsTheQueueOrder: a submit
// handed to the connection before its connect-time drain has started goes
// behind the calls that waited in the queue (the store's held create
// records it delivered only when the queue is empty).
func TestAsyncSubmitBeforeTheConnectTimeDrainKeepsTheQueueOrder(t *testing.T) {
	gb := &onlineGatedBus{Bus: bus.NewMemory(), entered: make(chan struct{}, 1), gate: make(chan struct{})}
	e := newEnv(t, func(c *broker.Config) { c.Bus = gb })
	released := false
	defer func() {
		if !released { // a failure before the release: let the join end
			close(gb.gate)
		}
	}()
	tok := e.token(auth.RoleCaller, "ws-w")
	first, _ := e.submit("ws-w", tok, `{"endpoint":"/first","timeout":10,"async":true,"wait_for_workspace_ms":5000}`, http.StatusAccepted)
	c := e.connect("ws-w", e.token(auth.RoleBridge, "ws-w"))
	<-gb.entered // joined, its drain not started
	if !broker.HandsOverForTest(e.broker, "ws-w") {
		t.Fatal("a submit is not handed to the connection: the window this test is about is not open")
	}
	second := e.submitAsync("ws-w", tok, `{"endpoint":"/second","timeout":10,"async":true}`)
	rec := <-second
	if rec.CorrelationID == "" {
		t.Fatal("second submit refused")
	}
	close(gb.gate)
	released = true
	wantOrder(t, c, []string{first.CorrelationID, rec.CorrelationID})
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
	h.c = h.e.connect(ws, h.e.token(auth.RoleBridge, ws))
	h.tok = h.e.token(auth.RoleCaller, ws)
	h.e.waitHandsOver(ws)
	h.sub = h.e.submitAsync(ws, h.tok, `{"endpoint":"/x","timeout":10,"async":true,"correlation_id":"`+cid+`"}`)
	h.st.waitEntered(t) // recorded delivered, not yet on the connection
	return h
}

func TestAsyncHeldCallWhoseConnectionWentFailsOnce(t *testing.T) {
	h := startHeldSubmit(t, "ws-g", "held-gone")
	st, e, c, tok, sub := h.st, h.e, h.c, h.tok, h.sub
	_ = c.ws.CloseNow()
	testwait.Until(t, 5*time.Second, func() bool { return len(e.broker.Workspaces()) == 0 }, "the broker to let the workspace go")
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
	c.wantCancel("held-cancel")
	c.ackOK(r, `"late"`)
	if _, got, _ := e.callStatus("held-cancel", tok, ""); got.Status != store.Cancelled {
		t.Fatalf("after the late answer: %+v", got)
	}
}

// preferSubmit submits body to ws with Prefer: respond-async, wait=S in
// the background; its HTTP status and record come on the channel.
func (e *env) preferSubmit(ws, token, body, wait string, header ...string) <-chan preferAnswer {
	out := make(chan preferAnswer, 1)
	go func() {
		status, _, raw := e.apiRequest(http.MethodPost, "/api/v1/workspaces/"+ws+"/calls", token, body, append([]string{"Prefer", "respond-async, wait=" + wait}, header...)...)
		a := preferAnswer{status: status, raw: raw}
		_ = json.Unmarshal(raw, &a.rec)
		out <- a
	}()
	return out
}

type preferAnswer struct {
	status int
	rec    store.Record
	raw    []byte
}

func TestAsyncSubmitThatWaitsIsRecordedOnceWithItsOutcome(t *testing.T) {
	st := newGatedStore(t)
	e, c, tok := heldClient(t, st, "ws-p")

	sub := e.preferSubmit("ws-p", tok, `{"endpoint":"/x","payload":{"n":1},"timeout":5}`, "5")
	r := c.nextCall()
	if string(r.call.Payload) != `{"n":1}` {
		t.Fatalf("client got %+v", r.call)
	}
	c.ackOK(r, `{"done":1}`)
	a := <-sub
	if a.status != http.StatusOK || a.rec.Status != store.Succeeded || a.rec.CorrelationID != r.call.CorrelationID ||
		a.rec.Response == nil || string(a.rec.Response.Result) != `{"done":1}` || a.rec.DeliveredAt == nil || a.rec.FinishedAt == nil {
		t.Fatalf("submit that waits answered HTTP %d %s", a.status, a.raw)
	}
	// One store step: the final record, nothing before it.
	if st.puts.Load() != 1 || st.helds.Load() != 0 || st.creates.Load() != 0 || st.finishes.Load() != 0 {
		t.Fatalf("store steps: %s; want one put", st.steps())
	}
	// What the submit answered is what is kept, for any reader.
	_, got, _ := e.callStatus(a.rec.CorrelationID, tok, "")
	if got.Status != store.Succeeded || !got.FinishedAt.Equal(*a.rec.FinishedAt) || !got.DeliveredAt.Equal(*a.rec.DeliveredAt) ||
		!got.CreatedAt.Equal(a.rec.CreatedAt) || string(got.Response.Result) != `{"done":1}` || got.WorkspaceID != "ws-p" || got.Endpoint != "/x" {
		t.Fatalf("record read back %+v, submit answered %+v", got, a.rec)
	}
	if status, after := e.cancelCall(a.rec.CorrelationID, tok); status != http.StatusOK || after.Status != store.Succeeded {
		t.Fatalf("cancel after the outcome: HTTP %d %+v", status, after)
	}

	// A caller that may ask for the call before the answer (its own id, or
	// an idempotency key to submit again with) gets it recorded first.
	for i, extra := range [][]string{nil, {"Idempotency-Key", "k-1"}} {
		body := `{"endpoint":"/x","timeout":5}`
		if extra == nil {
			body = `{"endpoint":"/x","timeout":5,"correlation_id":"own-id"}`
		}
		sub := e.preferSubmit("ws-p", tok, body, "5", extra...)
		c.ackOK(c.nextCall(), `"ok"`)
		if a := <-sub; a.status != http.StatusOK || a.rec.Status != store.Succeeded {
			t.Fatalf("submit %d answered HTTP %d %s", i, a.status, a.raw)
		}
		if st.helds.Load() != int32(i+1) || st.puts.Load() != 1 {
			t.Fatalf("after submit %d: %s; want it recorded before delivery", i, st.steps())
		}
	}
}

func TestAsyncSubmitThatWaitsGoesOnAsAnAsyncCallPastItsWait(t *testing.T) {
	st := newGatedStore(t)
	e, c, tok := heldClient(t, st, "ws-q")

	// Answered after the wait: 202 with the call recorded delivered, then
	// its answer goes to the record.
	start := time.Now()
	sub := e.preferSubmit("ws-q", tok, `{"endpoint":"/slow","timeout":5}`, "0.2")
	r := c.nextCall()
	a := <-sub
	if a.status != http.StatusAccepted || a.rec.Status != store.Delivered || a.rec.CorrelationID != r.call.CorrelationID || a.rec.DeliveredAt == nil {
		t.Fatalf("submit answered HTTP %d %s, want 202 delivered", a.status, a.raw)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 1200*time.Millisecond {
		t.Fatalf("submit answered after %s, want after its 0.2 s wait", d)
	}
	if _, got, _ := e.callStatus(r.call.CorrelationID, tok, ""); got.Status != store.Delivered {
		t.Fatalf("record after the wait: %+v", got)
	}
	c.ackOK(r, `{"late":1}`)
	if _, got, _ := e.callStatus(r.call.CorrelationID, tok, "?wait=5"); got.Status != store.Succeeded || string(got.Response.Result) != `{"late":1}` {
		t.Fatalf("outcome of the call past its wait: %+v", got)
	}
	if st.puts.Load() != 1 || st.finishes.Load() != 1 {
		t.Fatalf("store steps: %s; want one put (delivered) and one finish", st.steps())
	}

	// Cancelled past the wait: tool_cancel reaches the client, the outcome
	// is cancelled, and the client's late answer changes nothing.
	sub = e.preferSubmit("ws-q", tok, `{"endpoint":"/cancel-me","timeout":5}`, "0.1")
	r = c.nextCall()
	if a := <-sub; a.status != http.StatusAccepted {
		t.Fatalf("submit answered HTTP %d %s", a.status, a.raw)
	}
	if status, got := e.cancelCall(r.call.CorrelationID, tok); status != http.StatusOK || got.Status != store.Cancelled {
		t.Fatalf("cancel: HTTP %d %+v", status, got)
	}
	c.wantCancel(r.call.CorrelationID)
	c.ackOK(r, `"late"`)
	if _, got, _ := e.callStatus(r.call.CorrelationID, tok, ""); got.Status != store.Cancelled {
		t.Fatalf("after the late answer: %+v", got)
	}

	// The request goes before the wait is over: the call goes on as any
	// async call, recorded, and its answer is kept.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/api/v1/workspaces/ws-q/calls", strings.NewReader(`{"endpoint":"/orphan","timeout":5}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Prefer", "respond-async, wait=30")
		if res, err := http.DefaultClient.Do(req); err == nil {
			_ = res.Body.Close()
		}
	}()
	r = c.nextCall()
	cancel()
	<-gone
	testwait.Until(t, 5*time.Second, func() bool {
		status, got, _ := e.callStatus(r.call.CorrelationID, tok, "")
		return status == http.StatusOK && got.Status == store.Delivered
	}, "the call whose submit went to be recorded delivered")
	c.ackOK(r, `"kept"`)
	if _, got, _ := e.callStatus(r.call.CorrelationID, tok, "?wait=5"); got.Status != store.Succeeded || string(got.Response.Result) != `"kept"` {
		t.Fatalf("outcome of the call whose submit went: %+v", got)
	}
}

func TestAsyncSubmitThatWaitsAndCannotBeRecordedIsCancelled(t *testing.T) {
	st := newGatedStore(t)
	st.putErr = errors.New("store down (a fake failure)")
	e, c, tok := heldClient(t, st, "ws-f")
	sub := e.preferSubmit("ws-f", tok, `{"endpoint":"/x","timeout":5}`, "0.1")
	r := c.nextCall()
	a := <-sub
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.raw), protocol.CodeBusUnavailable) {
		t.Fatalf("submit whose call could not be recorded answered HTTP %d %s, want 503 bus_unavailable", a.status, a.raw)
	}
	c.wantCancel(r.call.CorrelationID)
	if status, _, _ := e.callStatus(r.call.CorrelationID, tok, ""); status != http.StatusNotFound {
		t.Fatalf("status of the unrecorded call: HTTP %d, want 404", status)
	}
}
