package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// The sweep, and how long records live.

func sweepEndsDeliveredCallsAtDeadlinePlusGrace(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{Grace: time.Second})
	rec := create(t, a, newCall("ws-d", 10*time.Second))
	claim(t, a, "ws-d", time.Now(), 1)
	if n := sweep(t, b, rec.Deadline.Add(999*time.Millisecond)); n != 0 {
		t.Fatalf("swept %d before deadline + grace", n)
	}
	if n := sweep(t, b, rec.Deadline.Add(time.Second)); n != 1 {
		t.Fatalf("swept %d at deadline + grace, want 1", n)
	}
	got := get(t, a, rec.CorrelationID)
	if got.Status != store.Failed || got.Response.Error != protocol.CodeTimeout {
		t.Fatalf("%+v %+v", got, got.Response)
	}
	if n := sweep(t, a, rec.Deadline.Add(time.Minute)); n != 0 {
		t.Fatalf("swept the call again: %d", n)
	}
}

func sweepEndsQueuedCallsAtTheirWaitOrDeadline(t *testing.T, pair Pair) {
	a, _ := pair(t, store.Options{})
	waiting := newCall("ws-w", 10*time.Second)
	waiting.OfflineAt = waiting.CreatedAt.Add(2 * time.Second)
	create(t, a, waiting)
	plain := create(t, a, newCall("ws-w", 5*time.Second))
	if n := sweep(t, a, waiting.CreatedAt.Add(1900*time.Millisecond)); n != 0 {
		t.Fatalf("swept %d before the wait ended", n)
	}
	if n := sweep(t, a, waiting.CreatedAt.Add(2*time.Second)); n != 1 {
		t.Fatalf("swept %d at the end of the wait, want 1", n)
	}
	if rec := get(t, a, waiting.CorrelationID); rec.Response == nil || rec.Response.Error != protocol.CodeWorkspaceOffline {
		t.Fatalf("waiting call: %+v", rec)
	}
	if rec := get(t, a, plain.CorrelationID); rec.Status != store.Queued {
		t.Fatalf("plain call ended early: %+v", rec)
	}
	if n := sweep(t, a, plain.Deadline); n != 1 {
		t.Fatalf("swept %d at the deadline, want 1", n)
	}
	if rec := get(t, a, plain.CorrelationID); rec.Response == nil || rec.Response.Error != protocol.CodeTimeout {
		t.Fatalf("plain call: %+v", rec)
	}
}

func offlineAtPastTheDeadlineMeansTheDeadline(t *testing.T, pair Pair) {
	a, _ := pair(t, store.Options{})
	rec := newCall("ws-o", 2*time.Second)
	rec.OfflineAt = rec.CreatedAt.Add(time.Minute) // waits longer than the call may take
	create(t, a, rec)
	if n := sweep(t, a, rec.Deadline); n != 1 {
		t.Fatalf("swept %d at the deadline", n)
	}
	if got := get(t, a, rec.CorrelationID); got.Response.Error != protocol.CodeTimeout {
		t.Fatalf("got %+v", got.Response)
	}
}

func recordIsForgottenAfterItsRetention(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{Retention: 300 * time.Millisecond})
	rec := newCall("ws-r", time.Minute)
	rec.IdempotencyKey = "forget-me"
	create(t, a, rec)
	finish(t, a, rec.CorrelationID, ok("", "1"))
	get(t, b, rec.CorrelationID)
	testwait.Until(t, wait, func() bool {
		_, _ = b.Sweep(ctx(t), time.Now(), 100) // Memory forgets in Sweep (and on read)
		_, err := b.Get(ctx(t), rec.CorrelationID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("record still there after its retention: %v", err)
		}
		return errors.Is(err, store.ErrNotFound)
	}, "the record to be forgotten after its retention")
	// Its idempotency key is free again.
	again := newCall("ws-r", time.Minute)
	again.IdempotencyKey = "forget-me"
	create(t, b, again)
}

func unfinishedRecordLivesUntilDeadlinePlusRetention(t *testing.T, pair Pair) {
	a, _ := pair(t, store.Options{Retention: 500 * time.Millisecond, Grace: 100 * time.Millisecond})
	rec := create(t, a, newCall("ws-u", 200*time.Millisecond))
	// Time passing is what is tested: the record's expiry (a TTL in Redis)
	// is the deadline plus grace plus retention, and no clock can be faked
	// for Redis.
	time.Sleep(time.Until(rec.Deadline.Add(400 * time.Millisecond)))
	get(t, a, rec.CorrelationID) // deadline + grace + retention is not here yet
	testwait.Until(t, wait, func() bool {
		_, err := a.Get(ctx(t), rec.CorrelationID)
		if !errors.Is(err, store.ErrNotFound) {
			return false
		}
		if time.Now().Before(rec.Deadline.Add(600 * time.Millisecond)) {
			t.Fatalf("forgotten before deadline + grace + retention")
		}
		return true
	}, "the record to be forgotten at its deadline plus grace plus retention")
}
