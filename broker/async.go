package broker

import (
	"context"
	"time"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
)

// Async calls on the routing core's side: package async drains a
// connection's queue (conn.queue) and writes outcomes; here a submit for a
// workspace this broker holds finds its holder. A submit to this broker's
// API for a workspace it holds itself takes a shorter way
// (async.Queue.Submit): the store records the call delivered in the
// step that records it, unless calls are queued ahead of it, and the broker
// delivers it on the connection at once, as if claimed. While the
// connection drains its queue (it does when it takes the workspace), a
// submit waits for that drain, a store step or a few, and then takes the
// shorter way behind the calls the drain delivered (holderForSubmit).

// DefaultSubmitDrainWait is how long a submit waits at most for the drain
// its workspace's holder is running (holderForSubmit): a drain is a store
// step or a few, and the submit answers 202 once it is handed over or
// queued.
const DefaultSubmitDrainWait = 200 * time.Millisecond

// Submit implements api.Core: it records an async call for ws and starts
// it. For a workspace this broker holds, the call is handed to the holder
// (async.Queue.Submit) and, when the submit waits for its outcome (wait >
// 0) with no correlation id or idempotency key of the caller's, recorded
// once with it (async.Queue.SubmitWait: waited is set). Otherwise it is
// queued in the store, for the holder anywhere to drain.
func (b *Broker) Submit(ctx context.Context, ws string, req caller.Request, wait time.Duration) (rec store.Record, waited bool, err error) {
	holder := b.holderForSubmit(ctx, ws)
	switch {
	case holder != nil && wait > 0 && req.CorrelationID == "" && req.IdempotencyKey == "":
		rec, err = holder.queue.SubmitWait(ctx, req, wait)
		return rec, true, err
	case holder != nil:
		rec, err = holder.queue.Submit(ctx, req)
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
