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
// the store (Watch and Close do not), and the Redis store's GetWatched.
const (
	OpCreate     = "create"
	OpCreateHeld = "create_held"
	OpPut        = "put"
	OpGet        = "get"
	OpGetWatched = "get_watched"
	OpClaim      = "claim"
	OpFinish     = "finish"
	OpWithdraw   = "withdraw"
	OpSweep      = "sweep"
)

// Observe returns s with every step timed for o: the broker's metrics of
// its call store (how long Redis takes for each step an async call waits
// on). The rest is s's, Pending included (see Redis.Pending).
func Observe(s Store, o Observer) Store { return &observed{s: s, o: o} }

// observed is Observe's Store.
//
// Concurrency: as s; o is called from the goroutine of the step.
type observed struct {
	s Store
	o Observer
}

func (w *observed) done(op string, start time.Time, err error) {
	w.o(op, time.Since(start), err)
}

func (w *observed) Create(ctx context.Context, rec Record) (Created, error) {
	start := time.Now()
	c, err := w.s.Create(ctx, rec)
	w.done(OpCreate, start, err)
	return c, err
}

func (w *observed) CreateHeld(ctx context.Context, rec Record) (Created, error) {
	start := time.Now()
	c, err := w.s.CreateHeld(ctx, rec)
	w.done(OpCreateHeld, start, err)
	return c, err
}

func (w *observed) Put(ctx context.Context, rec Record) (Record, error) {
	start := time.Now()
	r, err := w.s.Put(ctx, rec)
	w.done(OpPut, start, err)
	return r, err
}

func (w *observed) Get(ctx context.Context, cid string) (Record, error) {
	start := time.Now()
	r, err := w.s.Get(ctx, cid)
	w.done(OpGet, start, err)
	return r, err
}

func (w *observed) Claim(ctx context.Context, ws string, now time.Time, max int) ([]Record, error) {
	start := time.Now()
	recs, err := w.s.Claim(ctx, ws, now, max)
	w.done(OpClaim, start, err)
	return recs, err
}

func (w *observed) Finish(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (Outcome, error) {
	start := time.Now()
	out, err := w.s.Finish(ctx, cid, resp, now)
	w.done(OpFinish, start, err)
	return out, err
}

func (w *observed) Withdraw(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (Outcome, error) {
	start := time.Now()
	out, err := w.s.Withdraw(ctx, cid, resp, now)
	w.done(OpWithdraw, start, err)
	return out, err
}

func (w *observed) Sweep(ctx context.Context, now time.Time, max int) (int, error) {
	start := time.Now()
	n, err := w.s.Sweep(ctx, now, max)
	w.done(OpSweep, start, err)
	return n, err
}

func (w *observed) Watch(cid string) (<-chan Record, func()) { return w.s.Watch(cid) }

func (w *observed) Close() error { return w.s.Close() }

// GetWatched is s's GetWatched when it has one (Redis), else its Get.
func (w *observed) GetWatched(ctx context.Context, cid string) (Record, error) {
	g, ok := w.s.(interface {
		GetWatched(context.Context, string) (Record, error)
	})
	if !ok {
		return w.Get(ctx, cid)
	}
	start := time.Now()
	r, err := g.GetWatched(ctx, cid)
	w.done(OpGetWatched, start, err)
	return r, err
}

// Pending is s's Pending when it has one (Redis), else never known.
func (w *observed) Pending(cid string) (Record, bool) {
	if p, ok := w.s.(interface{ Pending(string) (Record, bool) }); ok {
		return p.Pending(cid)
	}
	return Record{}, false
}
