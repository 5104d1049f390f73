// Package async is the owner's side of async calls (docs/async-calls.md):
// the drain of a workspace's queue in the store by the connection that
// holds it (Queue), the submits a broker hands to its own holder
// (Queue.Submit, Queue.SubmitWait), the outcomes written to the
// store (Owner.Record) and the sweep that ends the calls nobody ends
// (Owner.Sweep). The caller's side (submit, read, wait, cancel) is package
// caller's; the HTTP API's, package api's.
//
// A submitted call waits in its workspace's queue in the store; the
// connection that holds the workspace drains the queue (when it takes the
// workspace, when a submit tells it with a drain message, after a bus
// reconnect): it claims calls, which marks them delivered in the store
// before their frame is written, and delivers them as any call. The call's
// one answer, from the call table's finish like every answer, goes to the
// store (Record); whoever wrote an outcome first (a cancel, the sweep)
// keeps it. A sweep on every instance ends the calls nobody ends: queued
// past their wait or deadline, delivered past deadline plus grace (their
// owner died).
//
// The routing core gives it its connections as Holders; the package never
// imports the core.
package async

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

const (
	// claimMax is how many calls one claim takes from a queue.
	claimMax = 32
	// sweepMax is how many calls one sweep ends at most; a full sweep is
	// followed by another at once.
	sweepMax = 256
	// storeOp bounds one store operation of the owner or the sweep.
	storeOp = 5 * time.Second
	// DefaultSweepInterval is how often each broker sweeps the store.
	DefaultSweepInterval = 100 * time.Millisecond
)

// Holder is the connection of this broker that holds a workspace, as the
// async side needs it (the routing core's conn). Its methods must not
// block, and must not be called with a Queue's lock held by the Holder.
type Holder interface {
	// WorkspaceID is the workspace held ("" before CONNECT).
	WorkspaceID() string
	// Deliver hands call to the client. Its one answer goes to w when it
	// is set, else to the store (Owner.Record). claimed marks a call this
	// holder claimed from the store: no other holder has it.
	Deliver(call protocol.ToolCall, w caller.Waiter, claimed bool)
	// CancelCall ends the call cid with cancelled; false when it is not in
	// the holder's table.
	CancelCall(cid, reason string) bool
	// Adopt makes the call cid, delivered with a waiter, an async call
	// from now on: its answer goes to the store. false when the call has
	// left the table: its answer is in the waiter, or on its way there.
	Adopt(cid string) bool
	// Pending reports whether the call cid is in the holder's table.
	Pending(cid string) bool
	// Serving reports whether the holder still serves its workspace: not
	// closed, not replaced, and its broker not shutting down.
	Serving() bool
	// Context ends when the connection does.
	Context() context.Context
	// Log adds the connection's fields to a log event; nil stays nil.
	Log(e *zerolog.Event) *zerolog.Event
}

// Queue is a holder's drain of its workspace's queue of async calls, and
// the claims in flight. Make it with Owner.Queue. All methods are safe for
// concurrent use and never block. Lock order: the Queue's lock, then the
// Holder's (Pending, Serving); the Holder calls Queue's methods without its
// own.
type Queue struct {
	o *Owner
	h Holder

	mu      sync.Mutex
	idle    chan struct{}     // while a drain goroutine runs: closed when it ends; nil while none runs
	again   bool              // look at the queue again after this round
	claims  int               // claims in flight (BeginClaim)
	cancels map[string]string // cancels that came during claims, by correlation id; nil when none is in flight
}

// Kick starts draining the workspace's queue or, while a drain runs, makes
// it look again.
func (q *Queue) Kick() {
	if q.h.WorkspaceID() == "" || !q.h.Serving() {
		return
	}
	q.mu.Lock()
	if q.idle != nil { // a drain runs
		q.again = true
		q.mu.Unlock()
		return
	}
	q.idle = make(chan struct{})
	q.mu.Unlock()
	if !q.o.cfg.Spawn(q.drain) {
		q.mu.Lock()
		q.endLocked()
		q.mu.Unlock()
	}
}

// Idle is closed when the drain that runs now ends; nil when none runs.
func (q *Queue) Idle() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.idle
}

// endLocked records that no drain runs any more and tells those waiting
// for its end (Idle). q.mu is held.
func (q *Queue) endLocked() {
	close(q.idle)
	q.idle = nil
}

// drain claims and delivers queued calls until the queue is empty and
// nobody asked to look again, the connection ends, or the store fails (the
// next drain message or reconnect starts it again).
func (q *Queue) drain() {
	for {
		q.mu.Lock()
		q.again = false
		q.mu.Unlock()
		stop := !q.h.Serving()
		n := 0
		if !stop {
			n = q.claimBatch()
		}
		q.mu.Lock()
		again := !stop && n >= 0 && (q.again || n == claimMax)
		if !again {
			q.endLocked()
		}
		q.mu.Unlock()
		if !again {
			return
		}
	}
}

// claimBatch claims up to claimMax calls and delivers them; -1 when the
// store failed.
func (q *Queue) claimBatch() int {
	ws := q.h.WorkspaceID()
	q.BeginClaim()
	hctx := q.h.Context()
	ctx, cancel := context.WithTimeout(hctx, storeOp)
	recs, err := q.o.cfg.Store.Claim(ctx, ws, time.Now(), claimMax)
	cancel()
	if err != nil && hctx.Err() == nil {
		q.h.Log(q.o.log.Warn()).Err(err).Msg("claiming queued async calls failed")
	}
	for i := range recs {
		call := recs[i].Call()
		q.h.Log(q.o.log.Debug()).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Msg("async call claimed")
		q.h.Deliver(call, nil, true)
	}
	q.EndClaim()
	if err != nil {
		return -1
	}
	return len(recs)
}

// BeginClaim starts a claim: from now until its EndClaim, calls the store
// marks delivered for the holder may reach its table later than a cancel
// for them (a drain's Claim, a submit's CreateDelivered). Claims may
// overlap.
func (q *Queue) BeginClaim() {
	q.mu.Lock()
	q.claims++
	if q.cancels == nil {
		q.cancels = make(map[string]string)
	}
	q.mu.Unlock()
}

// EndClaim ends a claim whose calls are all delivered. The last claim to
// end applies the cancels that came while claims were in flight: their
// calls, if they were claimed, are in the table now.
func (q *Queue) EndClaim() {
	q.mu.Lock()
	q.claims--
	var cancels map[string]string
	if q.claims == 0 {
		cancels, q.cancels = q.cancels, nil
	}
	q.mu.Unlock()
	for cid, reason := range cancels {
		q.h.CancelCall(cid, reason)
	}
}

// CancelClaiming handles a cancel for a call that was not in the holder's
// table: it may be one a claim in flight is taking. Kept until the claims
// end, or applied at once when the call reached the table meanwhile. The
// look at the table and the keeping are one step under q.mu, which
// EndClaim takes too: a cancel is either kept before the last claim ends,
// or finds its call in the table.
func (q *Queue) CancelClaiming(cid, reason string) {
	q.mu.Lock()
	arrived := q.h.Pending(cid)
	if !arrived && q.cancels != nil {
		q.cancels[cid] = reason
	}
	q.mu.Unlock()
	if arrived {
		q.h.CancelCall(cid, reason)
	}
}
