package broker

import (
	"context"
	"errors"
	"time"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Async calls on the owner's side (docs/async-calls.md). A submitted call
// waits in its workspace's queue in the store; the connection that holds
// the workspace drains the queue (when it takes the workspace, when a
// submit tells it with a drain message, after a bus reconnect): it claims
// calls, which marks them delivered in the store before their frame is
// written, and delivers them as any call. The call's one answer, from the
// call table's finish like every answer, goes to the store (recordOutcome);
// whoever wrote an outcome first (a cancel, the sweep) keeps it. A sweep on
// every instance ends the calls nobody ends: queued past their wait or
// deadline, delivered past deadline plus grace (their owner died).
//
// A submit to this broker's API for a workspace it holds itself takes a
// shorter way (submitLocal): the store records the call delivered in the
// step that records it, unless calls are queued ahead of it, and the
// broker delivers it on the connection at once, as if claimed. While the
// connection drains its queue (it does when it takes the workspace), a
// submit waits for that drain, a store step or a few, and then takes the
// shorter way behind the calls the drain delivered (holderForSubmit).

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
	// DefaultSubmitDrainWait is how long a submit waits at most for the
	// drain its workspace's holder is running (holderForSubmit): a drain
	// is a store step or a few, and the submit answers 202 once it is
	// handed over or queued.
	DefaultSubmitDrainWait = 200 * time.Millisecond
)

// kickQueue starts draining the workspace's queue of async calls or, while
// a drain runs, makes it look again. It never blocks.
func (c *conn) kickQueue() {
	c.mu.Lock()
	if c.closed || c.replaced || c.workspaceID() == "" || c.b.isDraining() {
		c.mu.Unlock()
		return
	}
	if c.queueIdle != nil { // a drain runs
		c.queueAgain = true
		c.mu.Unlock()
		return
	}
	c.queueIdle = make(chan struct{})
	c.mu.Unlock()
	if !c.b.spawn(c.drainQueue) {
		c.mu.Lock()
		c.endDrainLocked()
		c.mu.Unlock()
	}
}

// endDrainLocked records that no drain runs any more and tells those
// waiting for its end (holderForSubmit). c.mu is held.
func (c *conn) endDrainLocked() {
	close(c.queueIdle)
	c.queueIdle = nil
}

// drainQueue claims and delivers queued calls until the queue is empty and
// nobody asked to look again, the connection ends, or the store fails (the
// next drain message or reconnect starts it again).
func (c *conn) drainQueue() {
	for {
		c.mu.Lock()
		c.queueAgain = false
		stop := c.closed || c.replaced || c.b.isDraining()
		c.mu.Unlock()
		n := 0
		if !stop {
			n = c.claimBatch()
		}
		c.mu.Lock()
		again := !stop && n >= 0 && (c.queueAgain || n == claimMax)
		if !again {
			c.endDrainLocked()
		}
		c.mu.Unlock()
		if !again {
			return
		}
	}
}

// claimBatch claims up to claimMax calls and delivers them; -1 when the
// store failed.
func (c *conn) claimBatch() int {
	ws := c.workspaceID()
	c.beginClaim()
	ctx, cancel := context.WithTimeout(c.ctx, storeOp)
	recs, err := c.b.store.Claim(ctx, ws, time.Now(), claimMax)
	cancel()
	if err != nil && c.ctx.Err() == nil {
		c.event(c.b.log.Warn()).Err(err).Msg("claiming queued async calls failed")
	}
	for i := range recs {
		call := recs[i].Call()
		c.callEvent(c.b.log.Debug(), &call).Msg("async call claimed")
		c.deliver(call, nil, true)
	}
	c.endClaim()
	if err != nil {
		return -1
	}
	return len(recs)
}

// beginClaim starts a claim: from now until its endClaim, calls the store
// marks delivered for c may reach the table later than a cancel for them
// (a drain's Claim, a submit's CreateDelivered). Claims may overlap.
func (c *conn) beginClaim() {
	c.mu.Lock()
	c.claiming++
	if c.claimCancels == nil {
		c.claimCancels = make(map[string]string)
	}
	c.mu.Unlock()
}

// endClaim ends a claim whose calls are all delivered. The last claim to
// end applies the cancels that came while claims were in flight: their
// calls, if they were claimed, are in the table now.
func (c *conn) endClaim() {
	c.mu.Lock()
	c.claiming--
	var cancels map[string]string
	if c.claiming == 0 {
		cancels, c.claimCancels = c.claimCancels, nil
	}
	c.mu.Unlock()
	for cid, reason := range cancels {
		c.calls.cancel(cid, reason)
	}
}

// cancelClaiming handles a cancel for a call that was not in the table: it
// may be one a claim in flight is taking. Kept until the claims end, or
// applied at once when the call reached the table meanwhile.
func (c *conn) cancelClaiming(cid, reason string) {
	c.mu.Lock()
	_, arrived := c.calls.byID[cid]
	if !arrived && c.claimCancels != nil {
		c.claimCancels[cid] = reason
	}
	c.mu.Unlock()
	if arrived {
		c.calls.cancel(cid, reason)
	}
}

// Submit implements api.Core: it records an async call for ws and starts
// it. For a workspace this broker holds, the call is handed to the
// holder (submitLocal) and, when the submit waits for its outcome (wait >
// 0) with no correlation id or idempotency key of the caller's, recorded
// once with it (submitLocalWait: waited is set). Otherwise it is queued in
// the store, for the holder anywhere to drain.
func (b *Broker) Submit(ctx context.Context, ws string, req caller.Request, wait time.Duration) (rec store.Record, waited bool, err error) {
	holder := b.holderForSubmit(ctx, ws)
	switch {
	case holder != nil && wait > 0 && req.CorrelationID == "" && req.IdempotencyKey == "":
		rec, err = b.submitLocalWait(ctx, holder, req, wait)
		return rec, true, err
	case holder != nil:
		rec, err = b.submitLocal(ctx, holder, req)
		return rec, false, err
	}
	rec, err = b.caller.Submit(ctx, req)
	return rec, false, err
}

// holderForSubmit returns the connection of this broker that holds ws when
// a submit may hand it a new call itself (Submit): as localHolder,
// and not draining its queue, whose calls are older than the submit. A
// submit that finds the holder draining (it does when it takes the
// workspace) waits for that drain to end, up to SubmitDrainWait or ctx,
// and is then handed over behind the calls the drain delivered. Otherwise
// nil: the submit goes through the store and the bus (it is queued, and a
// drain delivers it).
func (b *Broker) holderForSubmit(ctx context.Context, ws string) *conn {
	c, idle := b.localHolderReady(ws, true)
	if c != nil || idle == nil {
		return c
	}
	b.drainWaits.Add(1)
	defer b.drainWaits.Add(-1)
	t := time.NewTimer(b.cfg.SubmitDrainWait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		return nil
	case <-ctx.Done():
		return nil
	case <-b.stopping:
		return nil
	}
	c, _ = b.localHolderReady(ws, true)
	return c
}

// submitLocal records an async call for ws, whose connection c this broker
// holds, and when the store recorded it delivered (no call queued ahead of
// it) delivers it on c at once: no drain message, no claim, no bus. The
// call then has its one outcome from c's call table like any claimed call:
// its answer, its deadline, a cancel, or workspace_disconnected when c went
// meanwhile (deliver refuses it, and the refusal is recorded).
func (b *Broker) submitLocal(ctx context.Context, c *conn, req caller.Request) (store.Record, error) {
	c.beginClaim()
	defer c.endClaim()
	// Not cut short by the request going: a call the store recorded
	// delivered is delivered (the store operation has its own bound).
	rec, claimed, err := b.caller.SubmitDelivered(context.WithoutCancel(ctx), req)
	if err == nil && claimed {
		call := rec.Call()
		c.callEvent(c.b.log.Debug(), &call).Msg("async call handed to the local holder")
		c.deliver(call, nil, true)
	}
	return rec, err
}

// submitLocalWait is submitLocal for a submit that waits for its outcome
// (Prefer: wait), has no idempotency key and whose correlation id this
// broker made: nobody else can know the call before the submit answers,
// so nothing reads or ends its record before then, and the call is
// recorded once, when that is needed. It is delivered on c at once, with
// its answer coming back here as a synchronous call's does on a local holder. If the
// answer comes within wait, the record is written final with it, in one
// store step instead of two (recorded delivered, then finished); if it
// cannot be written the caller still gets the outcome, which is then not
// kept. If the wait ends first, or the request goes, the call is recorded
// delivered and from then on is any async call: the table sends its
// answer to the store (callTable.adopt). A call that cannot be recorded
// then is cancelled (tool_cancel reaches the client) and the submit
// answers the store's error: no 202 for a call without a record.
func (b *Broker) submitLocalWait(ctx context.Context, c *conn, req caller.Request, wait time.Duration) (store.Record, error) {
	now := time.Now()
	rec, err := caller.NewRecord(&req, now)
	if err != nil {
		return store.Record{}, err
	}
	rec.Status, rec.DeliveredAt = store.Delivered, &now
	call := rec.Call()
	call.Async = false // answered here until adopted
	ch := make(caller.ChanWaiter, 1)
	c.callEvent(b.log.Debug(), &call).Msg("async call handed to the local holder, to be recorded with its outcome")
	c.deliver(call, ch, false)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case resp := <-ch:
		return b.putOutcome(ctx, rec, resp), nil
	case <-timer.C:
	case <-ctx.Done():
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeOp)
	stored, err := b.store.Put(opCtx, rec)
	cancel()
	if err != nil {
		c.calls.cancel(call.CorrelationID, "the async call could not be recorded")
		b.log.Warn().Err(err).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Str("workspace_id", rec.WorkspaceID).Msg("async call not recorded past its submit's wait; cancelled")
		return store.Record{}, protocol.Errorf(protocol.CodeBusUnavailable, "recording async call %s: %v", call.CorrelationID, err)
	}
	if !c.calls.adopt(call.CorrelationID) {
		// Answered while it was being recorded: the answer is in ch (the
		// table hands each call out once, and before it left the table).
		resp := <-ch
		call.Async = true
		b.recordOutcome(call, resp)
	}
	return stored, nil
}

// putOutcome records rec, delivered and not recorded yet, final with resp,
// and returns the final record; the outcome stands even when it could not
// be recorded.
func (b *Broker) putOutcome(ctx context.Context, rec store.Record, resp protocol.ToolResponse) store.Record {
	t := time.Now()
	resp.CorrelationID = rec.CorrelationID
	rec.Status, rec.FinishedAt, rec.Response = store.StatusOf(&resp), &t, &resp
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeOp)
	stored, err := b.store.Put(opCtx, rec)
	cancel()
	if err != nil {
		b.log.Warn().Err(err).Str("correlation_id", rec.CorrelationID).Str("endpoint", rec.Endpoint).Str("workspace_id", rec.WorkspaceID).Msg("async call outcome answered but not recorded")
		return rec
	}
	b.metrics.asyncOutcomes.WithLabelValues(stored.Status).Inc()
	return stored
}

// recordOutcome writes an async call's one answer to the store, off the
// calling goroutine (the call table's finish never blocks). A Finish that
// loses (the call was cancelled, or the sweep ended it) changes nothing. A
// store that cannot be reached is tried again until the call's deadline
// plus grace; past that the sweep ends the call.
func (b *Broker) recordOutcome(call protocol.ToolCall, resp protocol.ToolResponse) {
	ok := b.spawn(func() {
		until := time.UnixMilli(call.DeadlineMS).Add(b.cfg.CallGrace)
		backoff := 50 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(context.Background(), storeOp)
			out, err := b.store.Finish(ctx, call.CorrelationID, resp, time.Now())
			cancel()
			e := b.log.Debug().Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint)
			switch {
			case err == nil && out.Won:
				b.metrics.asyncOutcomes.WithLabelValues(out.Record.Status).Inc()
				e.Str("workspace_id", out.Record.WorkspaceID).Str("status", out.Record.Status).Msg("async call outcome recorded")
				return
			case err == nil:
				e.Str("workspace_id", out.Record.WorkspaceID).Str("status", out.Record.Status).Msg("async call already had its outcome; this answer dropped")
				return
			case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrClosed), !time.Now().Add(backoff).Before(until):
				b.log.Warn().Err(err).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Msg("async call outcome not recorded")
				return
			}
			select {
			case <-time.After(backoff):
			case <-b.stopping:
				return
			}
			backoff = min(2*backoff, time.Second)
		}
	})
	if !ok {
		b.log.Warn().Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Msg("async call answered after shutdown; outcome not recorded")
	}
}

// sweepLoop sweeps the store every SweepInterval until the broker stops.
func (b *Broker) sweepLoop() {
	t := time.NewTicker(b.cfg.SweepInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-b.stopping:
			return
		case <-t.C:
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), storeOp)
			n, err := b.store.Sweep(ctx, time.Now(), sweepMax)
			cancel()
			if err != nil {
				if !failing && !errors.Is(err, store.ErrClosed) {
					b.log.Warn().Err(err).Msg("sweeping async calls failed; retrying every interval")
				}
				failing = true
				break
			}
			if failing {
				b.log.Info().Msg("sweeping async calls works again")
				failing = false
			}
			if n > 0 {
				b.metrics.asyncOutcomes.WithLabelValues(store.Failed).Add(float64(n))
				b.log.Debug().Int("calls", n).Msg("async calls ended by the sweep")
			}
			if n < sweepMax {
				break
			}
		}
	}
}

// spawn runs f on a goroutine of the broker's wait group, unless Shutdown
// is already waiting for that group (then it returns false): the group is
// never added to while its Wait may be under way.
func (b *Broker) spawn(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return false
	}
	b.wg.Go(f)
	return true
}
