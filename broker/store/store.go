// Package store keeps the records of durable async calls
// (docs/async-calls.md): one record per call with its status and its
// outcome, a queue of the calls waiting for each workspace, and the times at
// which a sweep ends the calls nobody else ended.
//
// Store is the interface. Memory (one broker, no Redis) and Redis (shared by
// every broker instance, so any of them answers for any call) implement it
// side by side, and storetest is the conformance suite both pass.
//
// The rules every implementation keeps:
//
//   - A call is created queued and moves only forward: queued → delivered →
//     succeeded, failed or cancelled; or queued → failed or cancelled.
//   - Its outcome is written once. Finish moves a call from a status that is
//     not final to a final one atomically; whoever comes second gets the
//     stored outcome and changes nothing.
//   - Claim takes a workspace's queued calls oldest first and marks them
//     delivered in the same step, so a call is delivered at most once, and
//     never once its wait for the workspace or its deadline has passed. (A
//     store may instead hand a new call to the workspace's holder in the
//     step that records it, see Created.Told: then it is never queued.)
//   - CreateDelivered records a call delivered in the step that records it
//     (Created.Claimed) only when its workspace's queue is empty: a call
//     never goes ahead of queued ones.
//   - Sweep ends, with a failure, every call whose time passed: a queued
//     call at the end of its wait (workspace_offline) or at its deadline
//     (timeout), a delivered call at its deadline plus Options.Grace
//     (timeout: the broker holding it died).
//   - A record lives until Options.Retention after its outcome, and a call
//     that never got one until its deadline plus the grace plus the
//     retention.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Statuses of a call.
const (
	Queued    = "queued"    // recorded, waiting to be claimed by the workspace's holder
	Delivered = "delivered" // claimed and sent to the workspace's client
	Succeeded = "succeeded" // final: the response has success true
	Failed    = "failed"    // final: the response's error says why (timeout included)
	Cancelled = "cancelled" // final: cancelled before it had another outcome
)

// IsFinal reports whether status is an outcome.
func IsFinal(status string) bool {
	return status == Succeeded || status == Failed || status == Cancelled
}

// StatusOf is the final status of a call answered resp.
func StatusOf(resp *protocol.ToolResponse) string {
	switch {
	case resp.Success:
		return Succeeded
	case resp.Error == protocol.CodeCancelled:
		return Cancelled
	}
	return Failed
}

// Record is one async call. Its exported JSON is what the status endpoint
// returns; the fields tagged "-" are what the store keeps to deliver the
// call and to match a retried submit.
//
// Times are kept to the millisecond, in UTC.
type Record struct {
	CorrelationID string     `json:"correlation_id"`
	WorkspaceID   string     `json:"workspace_id"`
	Endpoint      string     `json:"endpoint"`
	Status        string     `json:"status"`
	CreatedAt     time.Time  `json:"created_at"`
	DeliveredAt   *time.Time `json:"delivered_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	Deadline      time.Time  `json:"deadline"`
	// Response is the outcome, set once the status is final.
	Response *protocol.ToolResponse `json:"response"`

	Payload json.RawMessage `json:"-"`
	Timeout float64         `json:"-"` // seconds, as in protocol.ToolCall
	// OfflineAt, when set, is when a call still queued ends
	// workspace_offline: its wait for the workspace is over. It is at most
	// the deadline (Create drops a later one). Zero means the call may wait
	// until its deadline and then ends timeout.
	OfflineAt      time.Time `json:"-"`
	IdempotencyKey string    `json:"-"`
	// Fingerprint identifies the request (caller.Fingerprint), so that a
	// retried submit with the same idempotency key but another body can be
	// told apart.
	Fingerprint string `json:"-"`
	// Traceparent is the W3C trace context the call continues (the
	// submit's span), so that its delivery, whenever and wherever it
	// happens, joins the caller's trace; empty when it has none.
	Traceparent string `json:"-"`
}

// Call is the tool call to deliver for r: marked async, so that its outcome
// goes to the store.
func (r *Record) Call() protocol.ToolCall {
	return protocol.ToolCall{
		CorrelationID: r.CorrelationID,
		Endpoint:      r.Endpoint,
		Payload:       r.Payload,
		Timeout:       r.Timeout,
		DeadlineMS:    r.Deadline.UnixMilli(),
		Async:         true,
		Traceparent:   r.Traceparent,
	}
}

// Created is what Create did.
type Created struct {
	// Record is the call recorded, or the retained call of the same
	// idempotency key.
	Record Record
	// Existing is set when Record is that retained call: nothing new was
	// recorded.
	Existing bool
	// Told is how many holders of the workspace the store handed a new
	// call to itself, or -1 when it does not (Memory; Redis on a Cluster):
	// then the call is queued and the caller tells the holder to drain the
	// queue (protocol.BusDrain on the workspace channel). The Redis store on
	// a single server publishes the call on the workspace channel in the
	// step that records it: heard by a holder (Told > 0) the call is
	// recorded delivered, never queued, and the holder delivers it as it
	// comes (marked async); heard by nobody (Told 0) it is queued.
	Told int
	// Claimed is set when CreateDelivered recorded the call delivered: nobody
	// was told, and the caller delivers it itself (Told is -1).
	Claimed bool
}

// Outcome is what Finish did.
type Outcome struct {
	// Record is the call after Finish, with its stored outcome: the one
	// this Finish wrote, or the one it found.
	Record Record
	// Won is set when this Finish wrote the outcome.
	Won bool
	// Was is the status before a Finish that won (Queued or Delivered).
	Was string
}

// Store keeps the records of async calls. All methods are safe for
// concurrent use; the ones taking a context give up when it ends.
type Store interface {
	// Create records rec as a new queued call at the end of its
	// workspace's queue. rec needs CorrelationID, WorkspaceID, Endpoint,
	// CreatedAt and Deadline; Status, DeliveredAt, FinishedAt and Response
	// are set by the store. When rec has an IdempotencyKey already used in
	// the same workspace by a call still retained, nothing is recorded and
	// that call's record is returned with Existing set. A CorrelationID
	// already recorded is ErrExists.
	Create(ctx context.Context, rec Record) (Created, error)
	// CreateDelivered is Create for a caller in the process that holds the
	// workspace's connection (a broker's own API): when the workspace's
	// queue is empty, the call is recorded delivered at once, never
	// queued and nobody told (Created.Claimed), and the caller delivers
	// it on that connection itself, as if it had claimed it. With calls
	// queued ahead of it, it is queued, and nobody is told either (Told
	// -1): the caller makes its holder drain the queue. The rest is
	// Create's.
	CreateDelivered(ctx context.Context, rec Record) (Created, error)
	// Put records rec as it is, for a caller in the process that holds the
	// workspace's connection and delivered the call on it before
	// recording it: a submit that waits for the outcome, whose call's id
	// nobody else knows before the submit answers. rec is Delivered, with
	// DeliveredAt (Sweep ends it at its deadline plus grace, as any
	// delivered call), or final, with FinishedAt and Response (kept for the
	// retention; nobody is told, since nobody can be watching). It is never
	// queued and may not carry an IdempotencyKey. A CorrelationID already
	// recorded is ErrExists. It returns the record as stored.
	Put(ctx context.Context, rec Record) (Record, error)
	// Get returns the record of a call, or ErrNotFound.
	Get(ctx context.Context, correlationID string) (Record, error)
	// GetWatched is Get for an instance that is to wait for the call's
	// outcome (its Watch registered first): where outcomes are told only
	// to the instances that may wait for them (Redis), the read makes this
	// one of them in the same atomic step. Elsewhere it is Get.
	GetWatched(ctx context.Context, correlationID string) (Record, error)
	// Pending returns the record of a call this instance recorded, as it
	// recorded it, while the store knows the call has no outcome (Redis:
	// see Redis.Pending): a wait for it, its Watch registered first, needs
	// no first read. false when it does not know (always, in memory).
	Pending(correlationID string) (Record, bool)
	// Claim takes up to max calls from the front of workspaceID's queue
	// that are still queued, their wait and deadline not passed at now, and
	// marks them delivered at now. Calls it passes over (cancelled, or
	// whose time passed) leave the queue; Sweep ends those not ended yet.
	Claim(ctx context.Context, workspaceID string, now time.Time, max int) ([]Record, error)
	// Finish gives a call not yet final the outcome resp (its status from
	// StatusOf) at now. It returns ErrNotFound for a call not recorded.
	Finish(ctx context.Context, correlationID string, resp protocol.ToolResponse, now time.Time) (Outcome, error)
	// Withdraw is Finish for a call still queued only: one that a holder
	// claimed meanwhile is left to its outcome (Won false, the record
	// delivered). A submit that finds nobody to serve its call withdraws it
	// this way, so that a holder connecting at that moment cannot run a
	// call recorded as never delivered.
	Withdraw(ctx context.Context, correlationID string, resp protocol.ToolResponse, now time.Time) (Outcome, error)
	// Sweep ends up to max calls whose time passed at now (see the package
	// doc) and forgets records past their retention. It returns how many
	// calls it ended.
	Sweep(ctx context.Context, now time.Time, max int) (int, error)
	// Watch returns a channel that receives one Record when the call gets
	// an outcome, by any Finish or Sweep on any instance sharing the
	// store: the final record when this instance wrote it, else an empty
	// Record (read it with Get). Register before reading the record, so
	// that no outcome falls between the two. On Redis the notification can
	// be lost while the connection is down: read the record again now and
	// then. stop releases the watch; it is idempotent.
	Watch(correlationID string) (outcome <-chan Record, stop func())
	// Close releases the store. Methods called after it fail with
	// ErrClosed; channels from Watch are left open.
	Close() error
}

// Errors of a Store.
var (
	ErrNotFound = errors.New("no such call")
	ErrExists   = errors.New("correlation_id already taken by another call")
	ErrClosed   = errors.New("call store closed")
)

// DefaultRetention is how long a record is kept after its outcome.
const DefaultRetention = 15 * time.Minute

// DefaultGrace is how long past its deadline a delivered call may wait for
// its outcome before Sweep ends it; the broker's own grace.
const DefaultGrace = 500 * time.Millisecond

// Options tune a Store. Zero values take the defaults.
type Options struct {
	Retention time.Duration // DefaultRetention
	Grace     time.Duration // DefaultGrace
}

func (o *Options) setDefaults() {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
}

// The failures Sweep writes. They are the same for every implementation.
const (
	msgOffline       = "no client served the workspace within wait_for_workspace_ms; the call was never delivered"
	msgQueuedTimeout = "the workspace did not connect before the call's deadline; the call was never delivered"
	msgLostOwner     = "no outcome by the deadline plus grace: the broker that delivered the call stopped"
)

// sweepFailure is the outcome Sweep gives a call found in status at its
// time. offline tells a queued call with an OfflineAt.
func sweepFailure(cid, status string, offline bool) protocol.ToolResponse {
	switch {
	case status == Delivered:
		return protocol.Failure(cid, protocol.CodeTimeout, msgLostOwner)
	case offline:
		return protocol.Failure(cid, protocol.CodeWorkspaceOffline, msgOffline)
	}
	return protocol.Failure(cid, protocol.CodeTimeout, msgQueuedTimeout)
}

// checkNew validates a record for Create and returns it normalised: times
// cut to the millisecond in UTC, the status queued, no outcome.
func checkNew(rec Record) (Record, error) {
	switch {
	case rec.CorrelationID == "":
		return rec, errors.New("creating call record: correlation_id is empty")
	case rec.WorkspaceID == "":
		return rec, errors.New("creating call record: workspace_id is empty")
	case rec.CreatedAt.IsZero() || rec.Deadline.IsZero():
		return rec, errors.New("creating call record: created_at and deadline are required")
	}
	rec.Status = Queued
	rec.CreatedAt, rec.Deadline = ms(rec.CreatedAt), ms(rec.Deadline)
	if !rec.OfflineAt.IsZero() {
		rec.OfflineAt = ms(rec.OfflineAt)
		if rec.OfflineAt.After(rec.Deadline) {
			rec.OfflineAt = time.Time{}
		}
	}
	rec.DeliveredAt, rec.FinishedAt, rec.Response = nil, nil, nil
	return rec, nil
}

// checkPut validates a record for Put and returns it normalised as
// checkNew does, with its status and outcome kept.
func checkPut(rec Record) (Record, error) {
	status, delivered, finished, resp := rec.Status, rec.DeliveredAt, rec.FinishedAt, rec.Response
	rec, err := checkNew(rec)
	switch {
	case err != nil:
		return rec, err
	case rec.IdempotencyKey != "":
		return rec, errors.New("putting call record: an idempotency key needs Create")
	case delivered == nil:
		return rec, errors.New("putting call record: delivered_at is required")
	case status == Delivered && finished == nil && resp == nil:
	case IsFinal(status) && finished != nil && resp != nil && StatusOf(resp) == status:
		r := *resp
		r.CorrelationID = rec.CorrelationID
		rec.Response = &r
		f := ms(*finished)
		rec.FinishedAt = &f
	default:
		return rec, fmt.Errorf("putting call record: status %q with finished_at %v and response %v: want delivered without an outcome, or a final status with both", status, finished != nil, resp != nil)
	}
	d := ms(*delivered)
	rec.Status, rec.DeliveredAt = status, &d
	rec.OfflineAt = time.Time{}
	return rec, nil
}

// ms cuts t to the millisecond, in UTC.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// fromMS is the time of unix milliseconds n; zero for 0.
func fromMS(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// claimable reports whether a queued call may still be delivered at now.
func claimable(rec *Record, now time.Time) bool {
	return now.Before(rec.Deadline) && (rec.OfflineAt.IsZero() || now.Before(rec.OfflineAt))
}

// dueAt is when Sweep ends rec if nobody else does.
func dueAt(rec *Record, grace time.Duration) time.Time {
	switch {
	case rec.Status == Delivered:
		return rec.Deadline.Add(grace)
	case !rec.OfflineAt.IsZero():
		return rec.OfflineAt
	}
	return rec.Deadline
}
