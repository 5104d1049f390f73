package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/broker/store/storetest"
	"github.com/tetherdev/tether/protocol"
)

// heard is an Observer that keeps what it hears.
type heard struct {
	mu    sync.Mutex
	steps []heardStep
}

type heardStep struct {
	op   string
	took time.Duration
	err  error
}

func (h *heard) observe(op string, took time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.steps = append(h.steps, heardStep{op, took, err})
}

func (h *heard) ops() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ops []string
	for _, s := range h.steps {
		ops = append(ops, s.op)
	}
	return ops
}

// The observed store is the store it wraps to everything that uses it: the
// whole conformance suite passes through it.
func TestObservedMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) (store.Store, store.Store) {
		m := store.Observe(store.NewMemory(opts), func(string, time.Duration, error) {})
		t.Cleanup(func() { _ = m.Close() })
		return m, m
	})
}

func TestObserveHearsEveryStepWithItsTimeAndError(t *testing.T) {
	h := &heard{}
	s := store.Observe(store.NewMemory(store.Options{}), h.observe)
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	rec := store.Record{CorrelationID: "obs-1", WorkspaceID: "ws", Endpoint: "/x", Payload: json.RawMessage(`[1]`), Timeout: 30, CreatedAt: now, Deadline: now.Add(30 * time.Second)}
	if _, err := s.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.CorrelationID = "obs-2"
	if _, err := s.CreateDelivered(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.CorrelationID, rec.Status, rec.DeliveredAt = "obs-3", store.Delivered, &now
	if _, err := s.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "obs-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "no-such-call"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of an unknown call: %v, want ErrNotFound", err)
	}
	if _, err := s.Claim(ctx, "ws", time.Now(), 8); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, "obs-1", protocol.Success("obs-1", json.RawMessage(`1`)), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Withdraw(ctx, "obs-2", protocol.Failure("obs-2", protocol.CodeCancelled, "x"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sweep(ctx, time.Now(), 8); err != nil {
		t.Fatal(err)
	}
	_, stop := s.Watch("obs-3") // not a step: not heard
	stop()

	want := []string{store.OpCreate, store.OpCreateDelivered, store.OpPut, store.OpGet, store.OpGet, store.OpClaim, store.OpFinish, store.OpWithdraw, store.OpSweep}
	if got := h.ops(); !slices.Equal(got, want) {
		t.Fatalf("heard %v, want %v", got, want)
	}
	for i, st := range h.steps {
		if st.took <= 0 || st.took > 5*time.Second {
			t.Errorf("step %d (%s) took %v", i, st.op, st.took)
		}
		if unknown := i == 4; unknown != (st.err != nil) || (unknown && !errors.Is(st.err, store.ErrNotFound)) {
			t.Errorf("step %d (%s) heard error %v", i, st.op, st.err)
		}
	}

	// A failing step is heard with its error.
	h.steps = nil
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "obs-1"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if len(h.steps) != 1 || !errors.Is(h.steps[0].err, store.ErrClosed) {
		t.Fatalf("after Close heard %+v, want one get with ErrClosed", h.steps)
	}
}

// The wrapper keeps the Redis store's Pending, which spares a wait on the
// submitting instance its first read, and its GetWatched, timed as its own
// step; on memory, which has neither, nothing is pending and GetWatched is
// a Get.
func TestObservedStoreKeepsPendingAndGetWatched(t *testing.T) {
	type pending interface {
		Pending(string) (store.Record, bool)
	}
	type watched interface {
		GetWatched(context.Context, string) (store.Record, error)
	}
	srv := redistest.Start(t)
	h := &heard{}
	r := store.Observe(newRedis(t, store.RedisConfig{URL: srv.URL(), Prefix: redistest.Prefix(t)}), h.observe)
	now := time.Now()
	rec := store.Record{CorrelationID: "obs-pending", WorkspaceID: "ws", Endpoint: "/x", Timeout: 30, CreatedAt: now, Deadline: now.Add(30 * time.Second)}
	if _, err := r.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	p, ok := r.(pending)
	if !ok {
		t.Fatal("the observed store has no Pending")
	}
	if got, ok := p.Pending("obs-pending"); !ok || got.Status != store.Queued {
		t.Fatalf("Pending through the wrapper = %+v, %v", got, ok)
	}
	if got, err := r.(watched).GetWatched(context.Background(), "obs-pending"); err != nil || got.Status != store.Queued {
		t.Fatalf("GetWatched through the wrapper = %+v, %v", got, err)
	}
	if ops := h.ops(); !slices.Equal(ops, []string{store.OpCreate, store.OpGetWatched}) {
		t.Fatalf("heard %v", ops)
	}
	hm := &heard{}
	m := store.Observe(store.NewMemory(store.Options{}), hm.observe)
	defer m.Close()
	if _, err := m.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(pending).Pending("obs-pending"); ok {
		t.Fatal("a memory store's call is pending through the wrapper")
	}
	if got, err := m.(watched).GetWatched(context.Background(), "obs-pending"); err != nil || got.Status != store.Queued {
		t.Fatalf("GetWatched on memory through the wrapper = %+v, %v", got, err)
	}
	if ops := hm.ops(); !slices.Equal(ops, []string{store.OpCreate, store.OpGet}) {
		t.Fatalf("memory: heard %v", ops)
	}
}
