// Package storetest is the conformance suite every store.Store
// implementation must pass. Implementations call Run from their own tests
// with a factory that returns fresh, isolated stores (for Redis: a unique
// prefix).
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Pair returns two stores that share their records, like the stores of two
// broker instances on one Redis, isolated from every other test; for the
// in-memory store both are the same value. The factory closes them in
// t.Cleanup.
type Pair func(t *testing.T, opts store.Options) (a, b store.Store)

// wait bounds every wait for something the store does on its own (a
// notification, an expiry).
const wait = 5 * time.Second

var seq atomic.Int64

// newCall is a record for ws made now, with timeout d.
func newCall(ws string, d time.Duration) store.Record {
	now := time.Now()
	return store.Record{
		CorrelationID: fmt.Sprintf("call-%d", seq.Add(1)),
		WorkspaceID:   ws,
		Endpoint:      "/api/ping",
		Payload:       json.RawMessage(`{"n":1}`),
		Timeout:       d.Seconds(),
		CreatedAt:     now,
		Deadline:      now.Add(d),
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return c
}

func create(t *testing.T, s store.Store, rec store.Record) store.Record {
	t.Helper()
	got, err := s.Create(ctx(t), rec)
	if err != nil || got.Existing {
		t.Fatalf("Create(%s) = existing %v, %v", rec.CorrelationID, got.Existing, err)
	}
	return got.Record
}

func get(t *testing.T, s store.Store, cid string) store.Record {
	t.Helper()
	rec, err := s.Get(ctx(t), cid)
	if err != nil {
		t.Fatalf("Get(%s): %v", cid, err)
	}
	return rec
}

func claim(t *testing.T, s store.Store, ws string, now time.Time, max int) []string {
	t.Helper()
	recs, err := s.Claim(ctx(t), ws, now, max)
	if err != nil {
		t.Fatalf("Claim(%s): %v", ws, err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		if r.Status != store.Delivered || r.DeliveredAt == nil {
			t.Fatalf("claimed %s has status %s, delivered_at %v", r.CorrelationID, r.Status, r.DeliveredAt)
		}
		ids[i] = r.CorrelationID
	}
	return ids
}

func finish(t *testing.T, s store.Store, cid string, resp protocol.ToolResponse) store.Outcome {
	t.Helper()
	out, err := s.Finish(ctx(t), cid, resp, time.Now())
	if err != nil {
		t.Fatalf("Finish(%s): %v", cid, err)
	}
	return out
}

func sweep(t *testing.T, s store.Store, now time.Time) int {
	t.Helper()
	n, err := s.Sweep(ctx(t), now, 1000)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return n
}

func ok(cid, result string) protocol.ToolResponse {
	return protocol.Success(cid, json.RawMessage(result))
}

// cases are the suite, in the order Run runs them. Each case takes the
// factory and makes the stores it needs, isolated from the others'.
var cases = []struct {
	name string
	run  func(t *testing.T, pair Pair)
}{
	{"CreateThenGetReturnsEveryField", createThenGetReturnsEveryField},
	{"GetUnknownIsNotFound", getUnknownIsNotFound},
	{"CreateWithATakenIDIsErrExists", createWithATakenIDIsErrExists},
	{"IdempotencyKeyReturnsTheRetainedCallOfItsWorkspace", idempotencyKeyReturnsTheRetainedCallOfItsWorkspace},
	{"ClaimTakesQueuedCallsOldestFirst", claimTakesQueuedCallsOldestFirst},
	{"CreateDeliveredIsDeliveredAtOnceWhenTheQueueIsEmpty", createDeliveredIsDeliveredAtOnceWhenTheQueueIsEmpty},
	{"PutDeliveredIsEndedOnceAndSweptAtDeadlinePlusGrace", putDeliveredIsEndedOnceAndSweptAtDeadlinePlusGrace},
	{"PutFinalKeepsItsOutcome", putFinalKeepsItsOutcome},
	{"OutcomeKeepsTheResultByteForByte", outcomeKeepsTheResultByteForByte},
	{"PutRefusesWhatNeedsCreate", putRefusesWhatNeedsCreate},
	{"CreateDeliveredQueuesBehindQueuedCalls", createDeliveredQueuesBehindQueuedCalls},
	{"CreateDeliveredKeepsIdempotencyAndTakenIDs", createDeliveredKeepsIdempotencyAndTakenIDs},
	{"ConcurrentClaimsDeliverEachCallOnce", concurrentClaimsDeliverEachCallOnce},
	{"ClaimPassesOverEndedAndLateCalls", claimPassesOverEndedAndLateCalls},
	{"FinishWritesTheOutcomeOnce", finishWritesTheOutcomeOnce},
	{"FinishGivesTheStatusOfTheResponse", finishGivesTheStatusOfTheResponse},
	{"CallEndedWhileQueuedIsNeverClaimed", callEndedWhileQueuedIsNeverClaimed},
	{"WithdrawEndsOnlyAQueuedCall", withdrawEndsOnlyAQueuedCall},
	{"SweepEndsDeliveredCallsAtDeadlinePlusGrace", sweepEndsDeliveredCallsAtDeadlinePlusGrace},
	{"SweepEndsQueuedCallsAtTheirWaitOrDeadline", sweepEndsQueuedCallsAtTheirWaitOrDeadline},
	{"OfflineAtPastTheDeadlineMeansTheDeadline", offlineAtPastTheDeadlineMeansTheDeadline},
	{"WatchFiresOnAnOutcomeFromAnyInstance", watchFiresOnAnOutcomeFromAnyInstance},
	{"WatchFiresForAnInstanceThatReadsToWait", watchFiresForAnInstanceThatReadsToWait},
	{"RecordIsForgottenAfterItsRetention", recordIsForgottenAfterItsRetention},
	{"UnfinishedRecordLivesUntilDeadlinePlusRetention", unfinishedRecordLivesUntilDeadlinePlusRetention},
	{"ClosedStoreRefuses", closedStoreRefuses},
}

// Run runs the conformance suite: each case as a subtest of its name, so
// that a failure names its case and -run 'Conformance/Name' picks one.
func Run(t *testing.T, pair Pair) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, pair) })
	}
}
