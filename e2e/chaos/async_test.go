package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Async calls (docs/async-calls.md), as a backend worker makes them with
// broker/caller's Async over HTTP: Submit to an entry broker (POST …/calls
// with async), Wait for the outcome (GET /api/v1/calls/{id}?wait=), then
// Status once more from another broker. One call in four carries an
// idempotency key: its submit is retried with the same key after a failure
// (the caller cannot tell whether the call was recorded) and sent once
// more after it succeeded, and both must name the same call. A call whose
// act is cancel is cancelled by its caller after giveUp.
//
// The invariant is exactly one final outcome per call: the final record
// Wait returns is the one a later Status (and a later keyed resubmit)
// returns, never another; its correlation id, workspace and endpoint are
// the call's, its response carries the call's nonce from the workspace
// called (judge), and a call no fault touched succeeded.
//
// A request that fails for a fault (the broker unreachable or shutting
// down, Redis unavailable) is tried again on the next broker until the
// call's deadline plus asyncSlack: the record is in Redis, so any broker
// answers for it. The record itself lives in Redis, and the run's Redis
// restarts empty (no persistence): a restart loses the records of every
// call in flight. Then Status and Wait answer call_not_found; main promises
// nothing else (docs/async-calls.md, "Redis, with its data"), and the
// check accepts a lost record only when a Redis restart touched the call
// (verdict_test.go).

// asyncSlack is how long past its deadline an async call's caller keeps
// trying to learn its outcome through faults.
const asyncSlack = 10 * time.Second

// asyncRetryPause is the pause before a request is tried again on the
// next broker.
const asyncRetryPause = 50 * time.Millisecond

// record flags.
const (
	// flagLost: the call's final outcome was seen, and then its record was
	// gone (call_not_found).
	flagLost uint8 = 1 << iota
	// flagRecreated: after the final outcome, the keyed submit sent again
	// made the call anew: a record created later than the one that gave
	// the outcome, so the call's record and its key were gone (a Redis
	// restart) when it came.
	flagRecreated
)

// asyncNote is what an async call adds to its record.
type asyncNote struct {
	flags   uint8
	checked time.Time // when the final Status was read
}

// transient reports whether err is a fault's failure that another broker,
// or the same one a moment later, may not have.
func transient(err error) bool {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		return true
	}
	switch pe.Code {
	case protocol.CodeBrokerUnreachable, protocol.CodeBusUnavailable, protocol.CodeBrokerShutdown, protocol.CodeOverloaded:
		return true
	}
	return false
}

func codeOf(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return "error"
}

// asyncCaller is one async call's way through the brokers: the broker it
// asks next, and how long it keeps trying.
type asyncCaller struct {
	r     *run
	entry int
	until time.Time
}

func (a *asyncCaller) http() *caller.HTTP { return a.r.http[a.entry] }

// retry runs op on the current broker, and again on the next one after a
// transient failure, until it succeeds, fails otherwise, or time is up.
func (a *asyncCaller) retry(ctx context.Context, op func(h *caller.HTTP) (store.Record, error)) (store.Record, error) {
	for {
		rec, err := op(a.http())
		if err == nil || !transient(err) || !time.Now().Add(asyncRetryPause).Before(a.until) {
			return rec, err
		}
		a.r.asyncRetries.Add(1)
		a.entry = (a.entry + 1) % len(a.r.http)
		select {
		case <-time.After(asyncRetryPause):
		case <-ctx.Done():
			return rec, err
		}
	}
}

// asyncCall makes call c as an async call and returns its outcome, a
// violation's description (bad), and what its record notes; done is when
// the final outcome was known.
func (r *run) asyncCall(c *call) (outcome, bad string, done time.Time, note asyncNote) {
	sent := time.Now()
	a := &asyncCaller{r: r, entry: c.entry, until: sent.Add(c.timeout + asyncSlack)}
	ctx, cancel := context.WithDeadline(context.Background(), a.until.Add(caller.MaxWaitPerRequest))
	defer cancel()
	req := caller.Request{WorkspaceID: c.ws.id, Endpoint: c.endpoint, Payload: c.payload, Timeout: c.timeout, CorrelationID: c.cid, IdempotencyKey: c.key}
	if c.wait {
		req.WaitForWorkspace = c.timeout
	}
	submit := func(h *caller.HTTP) (store.Record, error) { return h.Submit(ctx, req) }
	var rec store.Record
	var err error
	if c.key != "" {
		rec, err = a.retry(ctx, submit)
	} else {
		rec, err = submit(a.http())
	}
	if err != nil {
		// Not made (or, unkeyed, perhaps made: the caller cannot tell and
		// does not ask again; a lost 202 is the entry broker's fault).
		return "submit_" + codeOf(err), "", time.Now(), note
	}
	if bad := r.ownRecord(c, rec); bad != "" {
		return "wrong_record", bad, time.Now(), note
	}
	if c.key != "" {
		// Sent again, to another broker, as a caller that missed the 202
		// would: the same call answers.
		a.entry = (a.entry + 1) % len(r.http)
		again, err := a.retry(ctx, submit)
		switch {
		case err != nil && !transient(err):
			return "resubmit_" + codeOf(err), fmt.Sprintf("the same submit with idempotency key %q sent again failed: %v", c.key, err), time.Now(), note
		case err == nil && again.CorrelationID != c.cid:
			return "idempotency_broken", fmt.Sprintf("the submit with idempotency key %q sent again started call %q", c.key, again.CorrelationID), time.Now(), note
		case err == nil:
			r.asyncResubmits.Add(1)
		}
	}
	cancelled := false
	if c.act == actCancel && !store.IsFinal(rec.Status) {
		time.Sleep(time.Until(sent.Add(c.giveUp))) // the call's schedule: cancelled at its give-up time
		got, err := a.retry(ctx, func(h *caller.HTTP) (store.Record, error) { return h.Cancel(ctx, c.cid) })
		cancelled = err == nil && got.Status == store.Cancelled
		r.asyncCancels.Add(1)
	}
	final := rec
	for !store.IsFinal(final.Status) {
		left := time.Until(a.until)
		if left <= 0 {
			return "no_final_outcome", fmt.Sprintf("no final outcome %s past its deadline (status %s)", asyncSlack, final.Status), time.Now(), note
		}
		final, err = a.retry(ctx, func(h *caller.HTTP) (store.Record, error) { return h.Wait(ctx, c.cid, time.Until(a.until)) })
		if err != nil {
			// The record is gone (a Redis restart: checked at the end),
			// or the brokers did not answer until the time was up.
			return codeOf(err), "", time.Now(), note
		}
	}
	done = time.Now()
	if bad := r.ownRecord(c, final); bad != "" {
		return "wrong_record", bad, done, note
	}
	// Once more, from another broker: the outcome stays what it was.
	a.entry = (a.entry + 1) % len(r.http)
	a.until = time.Now().Add(asyncSlack)
	again, err := a.retry(ctx, func(h *caller.HTTP) (store.Record, error) { return h.Status(ctx, c.cid) })
	note.checked = time.Now()
	switch {
	case codeOf(err) == protocol.CodeCallNotFound:
		note.flags |= flagLost
	case err != nil && !transient(err):
		return "status_" + codeOf(err), fmt.Sprintf("reading back the call's final outcome failed: %v", err), done, note
	case err != nil:
		// The brokers did not answer for asyncSlack: the final outcome
		// stands, unchecked.
	default:
		switch diff := sameFinal(final, again); {
		case diff == "":
		case c.key != "" && again.CreatedAt.After(final.CreatedAt):
			// Not this record changed, but a new one: the record was lost
			// (a Redis restart) and the keyed submit sent again above made
			// the call anew. Checked at the end against the restarts.
			note.flags |= flagRecreated
		default:
			return "two_finals", diff, done, note
		}
	}
	if c.key != "" && err == nil {
		again, err := a.retry(ctx, submit)
		if err == nil {
			switch diff := sameFinal(final, again); {
			case diff == "":
			case again.CreatedAt.After(final.CreatedAt):
				// Not this record changed, but a new one: checked at the
				// end against the Redis restarts since the call was sent.
				note.flags |= flagRecreated
				note.checked = time.Now()
			default:
				return "two_finals", "the keyed submit sent after the outcome: " + diff, done, note
			}
		}
	}
	judged := c
	if c.act == actCancel && !cancelled {
		// The cancel did not land (a fault): the client's late answer
		// may be the outcome.
		cc := *c
		cc.act = actAck
		judged = &cc
	}
	outcome, bad = r.judge(judged, *final.Response)
	return outcome, bad, done, note
}

// ownRecord checks that rec is call c's: its correlation id, workspace and
// endpoint, and a final status that agrees with its response.
func (r *run) ownRecord(c *call, rec store.Record) string {
	switch {
	case rec.CorrelationID != c.cid:
		return fmt.Sprintf("the record of call %s carries correlation id %q", c.cid, rec.CorrelationID)
	case rec.WorkspaceID != c.ws.id:
		return fmt.Sprintf("the record of a call to %s names workspace %q", c.ws.id, rec.WorkspaceID)
	case rec.Endpoint != c.endpoint:
		return fmt.Sprintf("the record of a call to %s names endpoint %q", c.endpoint, rec.Endpoint)
	case !store.IsFinal(rec.Status):
		return ""
	case rec.Response == nil:
		return fmt.Sprintf("a %s record without a response", rec.Status)
	case store.StatusOf(rec.Response) != rec.Status:
		return fmt.Sprintf("a %s record whose response says %s (%s)", rec.Status, store.StatusOf(rec.Response), rec.Response.Error)
	}
	return ""
}

// sameFinal returns what differs between the final record a caller saw
// and a later read of the same call ("" when they agree): once final, a
// record's status, response and finish time never change.
func sameFinal(final, later store.Record) string {
	if !store.IsFinal(later.Status) {
		return fmt.Sprintf("final %s, then read back %s", final.Status, later.Status)
	}
	if later.Status != final.Status {
		return fmt.Sprintf("final %s, then read back %s", final.Status, later.Status)
	}
	a, b := final.Response, later.Response
	if a == nil || b == nil {
		return fmt.Sprintf("final %s with response %v, then with response %v", final.Status, a != nil, b != nil)
	}
	if a.Success != b.Success || a.Error != b.Error || a.CorrelationID != b.CorrelationID || !bytes.Equal(compactJSON(a.Result), compactJSON(b.Result)) {
		return fmt.Sprintf("final response %.200s, then read back %.200s", describe(a), describe(b))
	}
	if (final.FinishedAt == nil) != (later.FinishedAt == nil) || (final.FinishedAt != nil && !final.FinishedAt.Equal(*later.FinishedAt)) {
		return fmt.Sprintf("finished at %v, then read back finished at %v", final.FinishedAt, later.FinishedAt)
	}
	return ""
}

func compactJSON(b json.RawMessage) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

func describe(resp *protocol.ToolResponse) string {
	if resp.Success {
		return "success " + string(compactJSON(resp.Result))
	}
	return "failure " + resp.Error + ": " + resp.Message
}
