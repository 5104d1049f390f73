package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Creating, reading and putting records.

func createThenGetReturnsEveryField(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{})
	rec := newCall("ws", 30*time.Second)
	rec.Payload = json.RawMessage(`{"text":"é\u2028<&>","big":"` + strings.Repeat("x", 256<<10) + `"}`)
	rec.Timeout = 30.25
	rec.OfflineAt = rec.CreatedAt.Add(2 * time.Second)
	rec.IdempotencyKey, rec.Fingerprint = "key/1 é", "fp"
	rec.Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	created := create(t, a, rec)
	got := get(t, b, rec.CorrelationID)
	if got.Status != store.Queued || got.DeliveredAt != nil || got.FinishedAt != nil || got.Response != nil {
		t.Fatalf("new record: %+v", got)
	}
	want := created
	for _, r := range []store.Record{want, got} {
		if r.CorrelationID != rec.CorrelationID || r.WorkspaceID != "ws" || r.Endpoint != "/api/ping" || string(r.Payload) != string(rec.Payload) ||
			r.Timeout != 30.25 || r.IdempotencyKey != "key/1 é" || r.Fingerprint != "fp" || r.Traceparent != rec.Traceparent ||
			!r.CreatedAt.Equal(rec.CreatedAt.Truncate(time.Millisecond)) || !r.Deadline.Equal(rec.Deadline.Truncate(time.Millisecond)) ||
			!r.OfflineAt.Equal(rec.OfflineAt.Truncate(time.Millisecond)) {
			t.Fatalf("record %+v does not keep what was created (%+v)", r, rec)
		}
	}
	call := got.Call()
	if !call.Async || call.DeadlineMS != rec.Deadline.UnixMilli() || call.Timeout != 30.25 || string(call.Payload) != string(rec.Payload) || call.Traceparent != rec.Traceparent {
		t.Fatalf("Call() = %+v", call)
	}
}

func getUnknownIsNotFound(t *testing.T, pair Pair) {
	a, _ := pair(t, store.Options{})
	if _, err := a.Get(ctx(t), "never-made"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
	if _, err := a.Finish(ctx(t), "never-made", ok("never-made", "1"), time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Finish = %v, want ErrNotFound", err)
	}
}

func createWithATakenIDIsErrExists(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{})
	rec := newCall("ws", time.Minute)
	create(t, a, rec)
	if _, err := b.Create(ctx(t), rec); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
	if ids := claim(t, a, "ws", time.Now(), 10); len(ids) != 1 {
		t.Fatalf("claimed %v, want the call once", ids)
	}
}

func idempotencyKeyReturnsTheRetainedCallOfItsWorkspace(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{})
	first := newCall("ws", time.Minute)
	first.IdempotencyKey, first.Fingerprint = "job-7", "fp1"
	create(t, a, first)
	retry := newCall("ws", time.Minute)
	retry.IdempotencyKey, retry.Fingerprint = "job-7", "fp2"
	got, err := b.Create(ctx(t), retry)
	if err != nil || !got.Existing || got.Record.CorrelationID != first.CorrelationID || got.Record.Fingerprint != "fp1" {
		t.Fatalf("retry = %+v, %v; want the first call", got, err)
	}
	if _, err := a.Get(ctx(t), retry.CorrelationID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the retry was recorded too: %v", err)
	}
	other := newCall("ws-other", time.Minute)
	other.IdempotencyKey = "job-7"
	create(t, b, other) // another workspace: another call
	// An outcome does not free the key.
	finish(t, a, first.CorrelationID, ok(first.CorrelationID, `"done"`))
	again := newCall("ws", time.Minute)
	again.IdempotencyKey = "job-7"
	got, err = a.Create(ctx(t), again)
	if err != nil || !got.Existing || got.Record.CorrelationID != first.CorrelationID || got.Record.Status != store.Succeeded {
		t.Fatalf("after the outcome: %+v, %v", got, err)
	}
	if ids := claim(t, a, "ws", time.Now(), 10); len(ids) != 0 {
		t.Fatalf("claimed %v; the retries must not be queued", ids)
	}
}

func createDeliveredIsDeliveredAtOnceWhenTheQueueIsEmpty(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{Grace: time.Second})
	rec := newCall("ws-h", 10*time.Second)
	rec.OfflineAt = rec.CreatedAt.Add(time.Second) // no matter: it is delivered
	before := time.Now().Truncate(time.Millisecond)
	got, err := a.CreateDelivered(ctx(t), rec)
	if err != nil || !got.Claimed || got.Existing || got.Told != -1 || got.Record.Status != store.Delivered ||
		got.Record.DeliveredAt == nil || got.Record.DeliveredAt.Before(before) {
		t.Fatalf("CreateDelivered on an empty queue = %+v, %v", got, err)
	}
	stored := get(t, b, rec.CorrelationID)
	if stored.Status != store.Delivered || stored.DeliveredAt == nil || !stored.DeliveredAt.Equal(*got.Record.DeliveredAt) {
		t.Fatalf("stored %+v", stored)
	}
	if ids := claim(t, b, "ws-h", time.Now(), 10); len(ids) != 0 {
		t.Fatalf("claimed %v: a call created delivered must not be queued too", ids)
	}
	// A delivered call: the sweep leaves it to its holder until the
	// deadline plus the grace, then ends it timeout.
	if n := sweep(t, b, rec.Deadline.Add(999*time.Millisecond)); n != 0 {
		t.Fatalf("swept %d before deadline + grace", n)
	}
	if n := sweep(t, b, rec.Deadline.Add(time.Second)); n != 1 {
		t.Fatalf("swept %d at deadline + grace, want 1", n)
	}
	if end := get(t, a, rec.CorrelationID); end.Status != store.Failed || end.Response.Error != protocol.CodeTimeout {
		t.Fatalf("swept record %+v", end)
	}
}

func createDeliveredQueuesBehindQueuedCalls(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{})
	first := create(t, a, newCall("ws-hq", time.Minute))
	got, err := b.CreateDelivered(ctx(t), newCall("ws-hq", time.Minute))
	if err != nil || got.Claimed || got.Told != -1 || got.Record.Status != store.Queued {
		t.Fatalf("CreateDelivered behind a queued call = %+v, %v; want it queued", got, err)
	}
	if ids := claim(t, a, "ws-hq", time.Now(), 10); fmt.Sprint(ids) != fmt.Sprint([]string{first.CorrelationID, got.Record.CorrelationID}) {
		t.Fatalf("claimed %v, want the queued call, then the one created to be delivered", ids)
	}
	// The queue is empty again: the next one is delivered at once.
	if next, err := a.CreateDelivered(ctx(t), newCall("ws-hq", time.Minute)); err != nil || !next.Claimed {
		t.Fatalf("CreateDelivered on the emptied queue = %+v, %v", next, err)
	}
}

func createDeliveredKeepsIdempotencyAndTakenIDs(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{})
	first := newCall("ws-hi", time.Minute)
	first.IdempotencyKey = "job-h"
	created, err := a.CreateDelivered(ctx(t), first)
	if err != nil || !created.Claimed {
		t.Fatalf("CreateDelivered = %+v, %v", created, err)
	}
	retry := newCall("ws-hi", time.Minute)
	retry.IdempotencyKey = "job-h"
	got, err := b.CreateDelivered(ctx(t), retry)
	if err != nil || !got.Existing || got.Claimed || got.Record.CorrelationID != first.CorrelationID || got.Record.Status != store.Delivered {
		t.Fatalf("retry = %+v, %v; want the first call, not claimed again", got, err)
	}
	taken := first
	taken.IdempotencyKey = ""
	if _, err := b.CreateDelivered(ctx(t), taken); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateDelivered with a taken id = %v, want ErrExists", err)
	}
}

func putDeliveredIsEndedOnceAndSweptAtDeadlinePlusGrace(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{Grace: time.Second})
	// Calls queued for the workspace do not matter: a put call was
	// delivered already.
	queued := create(t, a, newCall("ws-p", time.Minute))
	rec := newCall("ws-p", 10*time.Second)
	at := rec.CreatedAt.Add(3 * time.Millisecond)
	rec.Status, rec.DeliveredAt = store.Delivered, &at
	if put, err := a.Put(ctx(t), rec); err != nil || put.Status != store.Delivered || !put.DeliveredAt.Equal(at.Truncate(time.Millisecond)) || !put.CreatedAt.Equal(rec.CreatedAt.Truncate(time.Millisecond)) {
		t.Fatalf("Put delivered = %+v, %v", put, err)
	}
	got := get(t, b, rec.CorrelationID)
	if got.Status != store.Delivered || got.DeliveredAt == nil || !got.DeliveredAt.Equal(at.Truncate(time.Millisecond)) ||
		got.FinishedAt != nil || got.Response != nil || got.Endpoint != "/api/ping" || !got.Deadline.Equal(rec.Deadline.Truncate(time.Millisecond)) {
		t.Fatalf("put delivered record read back %+v", got)
	}
	if ids := claim(t, b, "ws-p", time.Now(), 10); len(ids) != 1 || ids[0] != queued.CorrelationID {
		t.Fatalf("claimed %v, want only the queued call %s", ids, queued.CorrelationID)
	}
	if n := sweep(t, b, rec.Deadline.Add(999*time.Millisecond)); n != 0 {
		t.Fatalf("swept %d before deadline + grace", n)
	}
	out := finish(t, b, rec.CorrelationID, ok(rec.CorrelationID, `{"r":1}`))
	if !out.Won || out.Was != store.Delivered || out.Record.Status != store.Succeeded {
		t.Fatalf("Finish of a put call = %+v", out)
	}
	if again := finish(t, a, rec.CorrelationID, protocol.Failure(rec.CorrelationID, protocol.CodeCancelled, "late")); again.Won || again.Record.Status != store.Succeeded {
		t.Fatalf("second Finish = %+v", again)
	}
	if n := sweep(t, b, rec.Deadline.Add(time.Second)); n != 0 {
		t.Fatalf("swept %d finished calls", n)
	}
	// Another, never finished: the sweep ends it as any delivered call.
	lost := newCall("ws-p", 10*time.Second)
	lost.Status, lost.DeliveredAt = store.Delivered, &lost.CreatedAt
	if _, err := a.Put(ctx(t), lost); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if n := sweep(t, b, lost.Deadline.Add(time.Second)); n != 1 {
		t.Fatalf("swept %d at deadline + grace, want 1", n)
	}
	if end := get(t, a, lost.CorrelationID); end.Status != store.Failed || end.Response.Error != protocol.CodeTimeout {
		t.Fatalf("swept record %+v", end)
	}
}

func putFinalKeepsItsOutcome(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{})
	rec := newCall("ws-pf", 10*time.Second)
	delivered, finished := rec.CreatedAt.Add(time.Millisecond), rec.CreatedAt.Add(7*time.Millisecond)
	resp := ok("", `{"echo":"é"}`)
	rec.Status, rec.DeliveredAt, rec.FinishedAt, rec.Response = store.Succeeded, &delivered, &finished, &resp
	outcome, stop := b.Watch(rec.CorrelationID)
	defer stop()
	if put, err := a.Put(ctx(t), rec); err != nil || put.Status != store.Succeeded || put.Response == nil || put.Response.CorrelationID != rec.CorrelationID {
		t.Fatalf("Put final = %+v, %v", put, err)
	}
	got := get(t, b, rec.CorrelationID)
	if got.Status != store.Succeeded || got.FinishedAt == nil || !got.FinishedAt.Equal(finished.Truncate(time.Millisecond)) ||
		got.Response == nil || !got.Response.Success || got.Response.CorrelationID != rec.CorrelationID || string(got.Response.Result) != `{"echo":"é"}` {
		t.Fatalf("put final record read back %+v (response %+v)", got, got.Response)
	}
	if out := finish(t, b, rec.CorrelationID, protocol.Failure(rec.CorrelationID, protocol.CodeCancelled, "late")); out.Won || out.Record.Status != store.Succeeded {
		t.Fatalf("Finish after a final Put = %+v", out)
	}
	if n := sweep(t, a, rec.Deadline.Add(time.Minute)); n != 0 {
		t.Fatalf("swept %d final calls", n)
	}
	if _, err := a.Put(ctx(t), rec); !errors.Is(err, store.ErrExists) {
		t.Fatalf("Put of a taken id = %v, want ErrExists", err)
	}
	select {
	case r := <-outcome:
		t.Fatalf("a final Put told a watcher: %+v", r)
	default:
	}
}

func putRefusesWhatNeedsCreate(t *testing.T, pair Pair) {
	a, _ := pair(t, store.Options{})
	at := time.Now()
	resp := ok("", `{}`)
	for name, edit := range map[string]func(*store.Record){
		"an idempotency key":         func(r *store.Record) { r.IdempotencyKey = "k" },
		"no delivered_at":            func(r *store.Record) { r.DeliveredAt = nil },
		"queued":                     func(r *store.Record) { r.Status = store.Queued },
		"final without a response":   func(r *store.Record) { r.Status, r.FinishedAt = store.Succeeded, &at },
		"a response of other status": func(r *store.Record) { r.Status, r.FinishedAt, r.Response = store.Failed, &at, &resp },
	} {
		rec := newCall("ws-pr", time.Minute)
		rec.Status, rec.DeliveredAt = store.Delivered, &at
		edit(&rec)
		if _, err := a.Put(ctx(t), rec); err == nil {
			t.Errorf("Put with %s: no error", name)
		}
		if _, err := a.Get(ctx(t), rec.CorrelationID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Put with %s recorded the call (%v)", name, err)
		}
	}
}

func closedStoreRefuses(t *testing.T, pair Pair) {
	a, _ := pair(t, store.Options{})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx(t), newCall("ws", time.Minute)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Create after Close = %v", err)
	}
	if _, err := a.CreateDelivered(ctx(t), newCall("ws", time.Minute)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("CreateDelivered after Close = %v", err)
	}
	if _, err := a.Get(ctx(t), "x"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}
