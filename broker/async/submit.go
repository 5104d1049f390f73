package async

import (
	"context"
	"time"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// A submit to this broker's API for a workspace it holds itself takes a
// shorter way than the store's queue: it is handed to the holder through
// the holder's Queue.

// Submit records an async call for the workspace of the queue's holder, a
// connection of this broker, and when the store recorded it delivered (no
// call queued ahead of it) delivers it on the holder at once: no drain
// message, no claim, no bus. The call then has its one outcome from the
// holder's call table like any claimed call: its answer, its deadline, a
// cancel, or workspace_disconnected when the holder went meanwhile (its
// delivery is refused, and the refusal is recorded).
func (q *Queue) Submit(ctx context.Context, req caller.Request) (store.Record, error) {
	o, h := q.o, q.h
	q.BeginClaim()
	defer q.EndClaim()
	// Not cut short by the request going: a call the store recorded
	// delivered is delivered (the store operation has its own bound).
	rec, claimed, err := o.cfg.Caller.SubmitDelivered(context.WithoutCancel(ctx), req)
	if err == nil && claimed {
		call := rec.Call()
		h.Log(o.log.Debug()).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Msg("async call handed to the local holder")
		h.Deliver(call, nil, true)
	}
	return rec, err
}

// SubmitWait is Submit for a submit that waits for its outcome
// (Prefer: wait), has no idempotency key and whose correlation id this
// broker made: nobody else can know the call before the submit answers,
// so nothing reads or ends its record before then, and the call is
// recorded once, when that is needed. It is delivered on the holder at once, with
// its answer coming back here as a synchronous call's does on a local holder. If the
// answer comes within wait, the record is written final with it, in one
// store step instead of two (recorded delivered, then finished); if it
// cannot be written the caller still gets the outcome, which is then not
// kept. If the wait ends first, or the request goes, the call is recorded
// delivered and from then on is any async call: the table sends its
// answer to the store (Holder.Adopt). A call that cannot be recorded
// then is cancelled (tool_cancel reaches the client) and the submit
// answers the store's error: no 202 for a call without a record.
func (q *Queue) SubmitWait(ctx context.Context, req caller.Request, wait time.Duration) (store.Record, error) {
	o, h := q.o, q.h
	now := time.Now()
	rec, err := caller.NewRecord(ctx, &req, now)
	if err != nil {
		return store.Record{}, err
	}
	rec.Status, rec.DeliveredAt = store.Delivered, &now
	call := rec.Call()
	call.Async = false // answered here until adopted
	ch := make(caller.ChanWaiter, 1)
	h.Log(o.log.Debug()).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Msg("async call handed to the local holder, to be recorded with its outcome")
	h.Deliver(call, ch, false)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case resp := <-ch:
		return o.putOutcome(ctx, rec, resp), nil
	case <-timer.C:
	case <-ctx.Done():
	}
	opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeOp)
	stored, err := o.cfg.Store.Put(opCtx, rec)
	cancel()
	if err != nil {
		h.CancelCall(call.CorrelationID, "the async call could not be recorded")
		o.log.Warn().Err(err).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint).Str("workspace_id", rec.WorkspaceID).Msg("async call not recorded past its submit's wait; cancelled")
		return store.Record{}, protocol.Errorf(protocol.CodeBusUnavailable, "recording async call %s: %v", call.CorrelationID, err)
	}
	if !h.Adopt(call.CorrelationID) {
		// Answered while it was being recorded: the answer is in ch (the
		// table hands each call out once, and before it left the table).
		resp := <-ch
		call.Async = true
		o.Record(call, resp)
	}
	return stored, nil
}
