package store

import (
	"context"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Observer hears of every store step Observe's store takes: its operation
// (one of the Op constants), how long it took, and its error (nil, or
// what the step returned: ErrNotFound and ErrExists included).
type Observer func(op string, took time.Duration, err error)

// The operations an Observer hears of, one per Store method that goes to
// the store (Watch, Pending and Close do not).
const (
	OpCreate          = "create"
	OpCreateDelivered = "create_delivered"
	OpPut             = "put"
	OpGet             = "get"
	OpGetWatched      = "get_watched"
	OpClaim           = "claim"
	OpFinish          = "finish"
	OpWithdraw        = "withdraw"
	OpSweep           = "sweep"
)

// Observe returns s with every step timed for o: the broker's metrics of
// its call store (how long Redis takes for each step an async call waits
// on).
func Observe(s Store, o Observer) Store { return &observed{s: s, o: o} }

// observed is Observe's Store.
//
// Concurrency: as s; o is called from the goroutine of the step.
type observed struct {
	s Store
	o Observer
}

// observeStep runs step and tells w.o how long it took.
func observeStep[T any](w *observed, op string, step func() (T, error)) (T, error) {
	start := time.Now()
	v, err := step()
	w.o(op, time.Since(start), err)
	return v, err
}

func (w *observed) Create(ctx context.Context, rec Record) (Created, error) {
	return observeStep(w, OpCreate, func() (Created, error) { return w.s.Create(ctx, rec) })
}

func (w *observed) CreateDelivered(ctx context.Context, rec Record) (Created, error) {
	return observeStep(w, OpCreateDelivered, func() (Created, error) { return w.s.CreateDelivered(ctx, rec) })
}

func (w *observed) Put(ctx context.Context, rec Record) (Record, error) {
	return observeStep(w, OpPut, func() (Record, error) { return w.s.Put(ctx, rec) })
}

func (w *observed) Get(ctx context.Context, cid string) (Record, error) {
	return observeStep(w, OpGet, func() (Record, error) { return w.s.Get(ctx, cid) })
}

// GetWatched is timed as a get on memory, where it is one.
func (w *observed) GetWatched(ctx context.Context, cid string) (Record, error) {
	op := OpGetWatched
	if _, ok := w.s.(*Memory); ok {
		op = OpGet
	}
	return observeStep(w, op, func() (Record, error) { return w.s.GetWatched(ctx, cid) })
}

func (w *observed) Claim(ctx context.Context, ws string, now time.Time, max int) ([]Record, error) {
	return observeStep(w, OpClaim, func() ([]Record, error) { return w.s.Claim(ctx, ws, now, max) })
}

func (w *observed) Finish(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (Outcome, error) {
	return observeStep(w, OpFinish, func() (Outcome, error) { return w.s.Finish(ctx, cid, resp, now) })
}

func (w *observed) Withdraw(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (Outcome, error) {
	return observeStep(w, OpWithdraw, func() (Outcome, error) { return w.s.Withdraw(ctx, cid, resp, now) })
}

func (w *observed) Sweep(ctx context.Context, now time.Time, max int) (int, error) {
	return observeStep(w, OpSweep, func() (int, error) { return w.s.Sweep(ctx, now, max) })
}

func (w *observed) Watch(cid string) (<-chan Record, func()) { return w.s.Watch(cid) }

func (w *observed) Pending(cid string) (Record, bool) { return w.s.Pending(cid) }

func (w *observed) Close() error { return w.s.Close() }
