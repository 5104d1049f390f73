package caller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// The async calls of a BusCaller go through its Store: Submit records the
// call at the end of its workspace's queue and tells the holder (a drain
// message on the workspace channel), which claims and runs it and records
// the outcome; Status, Wait and Cancel work on the record. No reply travels
// to this caller, so the call does not depend on it staying alive.

// waitPoll is how often Wait reads the record again while it waits for the
// store's notification, which a Redis outage can lose.
const waitPoll = 500 * time.Millisecond

// storeOp bounds each store operation of Submit, Status and Cancel, so that
// a stalled Redis answers bus_unavailable instead of hanging the caller.
const storeOp = 3 * time.Second

func (c *BusCaller) store() (store.Store, error) {
	if c.opts.Store == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidRequest, "async calls need a call store (BusCallerOptions.Store)")
	}
	return c.opts.Store, nil
}

// storeError turns a store failure into a coded error.
func storeError(cid string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return protocol.Errorf(protocol.CodeCallNotFound, "no call %q (never made, or past its retention)", cid)
	case errors.Is(err, store.ErrExists):
		return protocol.Errorf(protocol.CodeConflict, "correlation_id %q is taken by another call", cid)
	}
	return protocol.Errorf(protocol.CodeBusUnavailable, "call store: %v", err)
}

// Submit implements Async.
func (c *BusCaller) Submit(ctx context.Context, req Request) (store.Record, error) {
	rec, _, err := c.submit(ctx, req, false)
	return rec, err
}

// SubmitWait implements Async.
func (c *BusCaller) SubmitWait(ctx context.Context, req Request, max time.Duration) (store.Record, error) {
	rec, err := c.Submit(ctx, req)
	if err != nil || store.IsFinal(rec.Status) || max <= 0 {
		return rec, err
	}
	final, err := c.Wait(ctx, rec.CorrelationID, max)
	if err != nil {
		return rec, err
	}
	return final, nil
}

// SubmitDelivered is Submit for a caller in the process that holds the
// workspace's connection (the broker's own API): the store records the
// call delivered at once when no call is queued ahead of it (claimed), and
// the caller then delivers it on that connection itself, exactly once —
// nobody else is told of it. Otherwise the call is queued and the holder
// told with a drain message, as by Submit.
func (c *BusCaller) SubmitDelivered(ctx context.Context, req Request) (rec store.Record, claimed bool, err error) {
	return c.submit(ctx, req, true)
}

// submit is Submit, or SubmitDelivered when delivered is set.
func (c *BusCaller) submit(ctx context.Context, req Request, delivered bool) (store.Record, bool, error) {
	st, err := c.store()
	if err != nil {
		return store.Record{}, false, err
	}
	if c.isClosed() {
		return store.Record{}, false, protocol.Errorf(protocol.CodeCallerClosed, "caller is closed")
	}
	rec, err := NewRecord(ctx, &req, time.Now())
	if err != nil {
		return store.Record{}, false, err
	}
	opCtx, cancel := context.WithTimeout(ctx, storeOp)
	defer cancel()
	create := st.Create
	if delivered {
		create = st.CreateDelivered
	}
	created, err := create(opCtx, rec)
	if err != nil {
		return store.Record{}, false, storeError(rec.CorrelationID, err)
	}
	stored, existing := created.Record, created.Existing
	log := func() *zerolog.Event { // an event is spent by Msg: one per line
		return c.opts.Logger.Debug().Str("correlation_id", stored.CorrelationID).Str("endpoint", stored.Endpoint).Str("workspace_id", stored.WorkspaceID)
	}
	if existing {
		if stored.Fingerprint != rec.Fingerprint {
			return store.Record{}, false, protocol.Errorf(protocol.CodeConflict,
				"idempotency key %q was used for another request in this workspace (call %s): same key, different endpoint, payload, timeout or wait", req.IdempotencyKey, stored.CorrelationID)
		}
		log().Msg("async call submitted again: the recorded call answers")
		return stored, false, nil
	}
	if created.Claimed {
		log().Msg("async call recorded delivered, for the holder in this process")
		return stored, true, nil
	}
	log().Msg("async call recorded")
	n := created.Told
	if n < 0 {
		msg := protocol.AppendBusMessage(nil, &protocol.BusMessage{Type: protocol.BusDrain})
		n, err = c.bus.Publish(opCtx, protocol.WorkspaceChannel(req.WorkspaceID), msg)
	}
	switch {
	case err != nil:
		// Recorded all the same: the holder claims it when it drains its
		// queue next (it does after every reconnect to the bus), or the
		// sweep ends it at its time.
		c.opts.Logger.Warn().Err(err).Str("correlation_id", stored.CorrelationID).Str("endpoint", stored.Endpoint).Str("workspace_id", stored.WorkspaceID).Msg("telling the holder about an async call failed")
	case n == 0 && req.WaitForWorkspace == 0:
		out, err := st.Withdraw(opCtx, stored.CorrelationID, protocol.Failure(stored.CorrelationID, protocol.CodeWorkspaceOffline, fmt.Sprintf("no client serves workspace %q", req.WorkspaceID)), time.Now())
		if err != nil {
			return stored, false, nil // recorded and queued; the sweep ends it
		}
		return out.Record, false, nil
	case n == 0:
		log().Msg("async call waits for its workspace")
	case created.Told > 0:
		log().Msg("async call handed to the workspace's holder")
	}
	return stored, false, nil
}

// Status implements Async.
func (c *BusCaller) Status(ctx context.Context, cid string) (store.Record, error) {
	st, err := c.store()
	if err != nil {
		return store.Record{}, err
	}
	return read(ctx, cid, st.Get)
}

// read reads cid's record with get, bounded by storeOp.
func read(ctx context.Context, cid string, get func(context.Context, string) (store.Record, error)) (store.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, storeOp)
	defer cancel()
	rec, err := get(ctx, cid)
	if err != nil {
		return store.Record{}, storeError(cid, err)
	}
	return rec, nil
}

// Wait implements Async.
func (c *BusCaller) Wait(ctx context.Context, cid string, max time.Duration) (store.Record, error) {
	return c.WaitFor(ctx, cid, max, nil)
}

// WaitFor is Wait with a check of the record as first read: when allow
// returns an error, WaitFor returns it at once (the broker's API checks
// the caller's token this way before it holds a request). It watches for
// the outcome before reading the record, so that an outcome between the two
// is not missed, and reads the record again on a notification without it,
// every waitPoll, and when max is over. A wait (max > 0) for a call the
// store recorded itself and knows to be without an outcome (Pending)
// skips the first read; a wait's reads are GetWatched, which on Redis make
// this instance one the outcome is told to.
func (c *BusCaller) WaitFor(ctx context.Context, cid string, max time.Duration, allow func(*store.Record) error) (store.Record, error) {
	st, err := c.store()
	if err != nil {
		return store.Record{}, err
	}
	outcome, stop := st.Watch(cid)
	defer func() { stop() }()
	var rec store.Record
	known := false
	if max > 0 {
		rec, known = st.Pending(cid)
	}
	switch {
	case known:
	case max > 0:
		if rec, err = read(ctx, cid, st.GetWatched); err != nil {
			return rec, err
		}
	default:
		if rec, err = c.Status(ctx, cid); err != nil {
			return rec, err
		}
	}
	if allow != nil {
		if err := allow(&rec); err != nil {
			return store.Record{}, err
		}
	}
	if store.IsFinal(rec.Status) || max <= 0 {
		return rec, nil
	}
	timer := time.NewTimer(max)
	defer timer.Stop()
	poll := time.NewTicker(waitPoll)
	defer poll.Stop()
	for {
		select {
		case got := <-outcome:
			if got.CorrelationID != "" {
				return got, nil
			}
			// Read it again, watching anew first (a watch fires once).
			stop()
			outcome, stop = st.Watch(cid)
			if rec, err = read(ctx, cid, st.GetWatched); err != nil || store.IsFinal(rec.Status) {
				return rec, err
			}
		case <-poll.C:
			if rec, err = c.Status(ctx, cid); err != nil || store.IsFinal(rec.Status) {
				return rec, err
			}
		case <-timer.C:
			return c.Status(ctx, cid)
		case <-ctx.Done():
			return rec, protocol.Errorf(protocol.CodeCancelled, "stopped waiting: %v", ctx.Err())
		case <-c.done:
			return rec, protocol.Errorf(protocol.CodeCallerClosed, "caller closed")
		}
	}
}

// Cancel implements Async: the outcome is written first, then the holder is
// told, so that its own later outcome for the call loses harmlessly.
func (c *BusCaller) Cancel(ctx context.Context, cid string) (store.Record, error) {
	st, err := c.store()
	if err != nil {
		return store.Record{}, err
	}
	opCtx, cancel := context.WithTimeout(ctx, storeOp)
	defer cancel()
	const reason = "cancelled by the caller"
	out, err := st.Finish(opCtx, cid, protocol.Failure(cid, protocol.CodeCancelled, reason), time.Now())
	if err != nil {
		return store.Record{}, storeError(cid, err)
	}
	if out.Won && out.Was == store.Delivered {
		// A queued call is simply never claimed now.
		c.cancelRemote(out.Record.WorkspaceID, cid, reason)
	}
	return out.Record, nil
}

func (c *BusCaller) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
