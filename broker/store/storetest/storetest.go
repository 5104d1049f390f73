// Package storetest is the conformance suite every store.Store
// implementation must pass. Implementations call Run from their own tests
// with a factory that returns fresh, isolated stores (for Redis: a unique
// prefix).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// Run runs the conformance suite.
func Run(t *testing.T, pair Pair) {
	t.Run("CreateThenGetReturnsEveryField", func(t *testing.T) {
		a, b := pair(t, store.Options{})
		rec := newCall("ws", 30*time.Second)
		rec.Payload = json.RawMessage(`{"text":"é\u2028<&>","big":"` + strings.Repeat("x", 256<<10) + `"}`)
		rec.Timeout = 30.25
		rec.OfflineAt = rec.CreatedAt.Add(2 * time.Second)
		rec.IdempotencyKey, rec.Fingerprint = "key/1 é", "fp"
		created := create(t, a, rec)
		got := get(t, b, rec.CorrelationID)
		if got.Status != store.Queued || got.DeliveredAt != nil || got.FinishedAt != nil || got.Response != nil {
			t.Fatalf("new record: %+v", got)
		}
		want := created
		for _, r := range []store.Record{want, got} {
			if r.CorrelationID != rec.CorrelationID || r.WorkspaceID != "ws" || r.Endpoint != "/api/ping" || string(r.Payload) != string(rec.Payload) ||
				r.Timeout != 30.25 || r.IdempotencyKey != "key/1 é" || r.Fingerprint != "fp" ||
				!r.CreatedAt.Equal(rec.CreatedAt.Truncate(time.Millisecond)) || !r.Deadline.Equal(rec.Deadline.Truncate(time.Millisecond)) ||
				!r.OfflineAt.Equal(rec.OfflineAt.Truncate(time.Millisecond)) {
				t.Fatalf("record %+v does not keep what was created (%+v)", r, rec)
			}
		}
		call := got.Call()
		if !call.Async || call.DeadlineMS != rec.Deadline.UnixMilli() || call.Timeout != 30.25 || string(call.Payload) != string(rec.Payload) {
			t.Fatalf("Call() = %+v", call)
		}
	})
	t.Run("GetUnknownIsNotFound", func(t *testing.T) {
		a, _ := pair(t, store.Options{})
		if _, err := a.Get(ctx(t), "never-made"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get = %v, want ErrNotFound", err)
		}
		if _, err := a.Finish(ctx(t), "never-made", ok("never-made", "1"), time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Finish = %v, want ErrNotFound", err)
		}
	})
	t.Run("CreateWithATakenIDIsErrExists", func(t *testing.T) {
		a, b := pair(t, store.Options{})
		rec := newCall("ws", time.Minute)
		create(t, a, rec)
		if _, err := b.Create(ctx(t), rec); !errors.Is(err, store.ErrExists) {
			t.Fatalf("second Create = %v, want ErrExists", err)
		}
		if ids := claim(t, a, "ws", time.Now(), 10); len(ids) != 1 {
			t.Fatalf("claimed %v, want the call once", ids)
		}
	})
	t.Run("IdempotencyKeyReturnsTheRetainedCallOfItsWorkspace", func(t *testing.T) {
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
	})
	t.Run("ClaimTakesQueuedCallsOldestFirst", func(t *testing.T) {
		a, b := pair(t, store.Options{})
		var ids []string
		for range 5 {
			ids = append(ids, create(t, a, newCall("ws-q", time.Minute)).CorrelationID)
		}
		create(t, a, newCall("ws-elsewhere", time.Minute))
		now := time.Now()
		if got := claim(t, b, "ws-q", now, 2); fmt.Sprint(got) != fmt.Sprint(ids[:2]) {
			t.Fatalf("first claim %v, want %v", got, ids[:2])
		}
		if got := claim(t, a, "ws-q", now, 10); fmt.Sprint(got) != fmt.Sprint(ids[2:]) {
			t.Fatalf("second claim %v, want %v", got, ids[2:])
		}
		if got := claim(t, a, "ws-q", now, 10); len(got) != 0 {
			t.Fatalf("third claim %v, want none", got)
		}
		rec := get(t, b, ids[0])
		if rec.Status != store.Delivered || rec.DeliveredAt == nil || !rec.DeliveredAt.Equal(now.Truncate(time.Millisecond)) {
			t.Fatalf("claimed record: %+v", rec)
		}
	})
	t.Run("CreateDeliveredIsDeliveredAtOnceWhenTheQueueIsEmpty", func(t *testing.T) {
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
	})
	t.Run("PutDeliveredIsEndedOnceAndSweptAtDeadlinePlusGrace", func(t *testing.T) {
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
	})
	t.Run("PutFinalKeepsItsOutcome", func(t *testing.T) {
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
	})
	t.Run("OutcomeKeepsTheResultByteForByte", func(t *testing.T) {
		// What the workspace answered is what every read returns, as a
		// synchronous call returns it: not re-encoded (json.Marshal would
		// escape <, >, & and U+2028 in it for HTML).
		a, b := pair(t, store.Options{})
		result := "{\"&000\":true,\"html\":\"<a href='x'>&amp;</a>\",\"ls\":\"\u2028\u2029\",\"esc\":\"\\u0026\"}"
		check := func(how string, rec store.Record) {
			t.Helper()
			if rec.Response == nil {
				t.Fatalf("%s: no response in %+v", how, rec)
			}
			if string(rec.Response.Result) != result {
				t.Fatalf("%s: result %s, want %s", how, rec.Response.Result, result)
			}
			// The API answers the record with the result written as it
			// writes a synchronous call's answer.
			sync := ok(rec.CorrelationID, result)
			if answer := rec.AppendJSON(nil); !strings.Contains(string(answer), `,"response":`+string(protocol.AppendToolResponse(nil, &sync))+"}") {
				t.Fatalf("%s: answered %s, want the response as a synchronous call's %s", how, answer, protocol.AppendToolResponse(nil, &sync))
			}
		}
		rec := newCall("ws-bytes", time.Minute)
		delivered, finished := rec.CreatedAt, rec.CreatedAt.Add(time.Millisecond)
		resp := ok("", result)
		rec.Status, rec.DeliveredAt, rec.FinishedAt, rec.Response = store.Succeeded, &delivered, &finished, &resp
		put, err := a.Put(ctx(t), rec)
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		check("Put", put)
		check("Get after Put", get(t, b, rec.CorrelationID))

		created := create(t, a, newCall("ws-bytes", time.Minute))
		claim(t, a, "ws-bytes", time.Now(), 1)
		done, stop := a.Watch(created.CorrelationID)
		defer stop()
		watched, err := b.GetWatched(ctx(t), created.CorrelationID)
		if err != nil {
			t.Fatalf("GetWatched: %v", err)
		}
		otherDone, stopOther := b.Watch(created.CorrelationID)
		defer stopOther()
		out := finish(t, b, created.CorrelationID, ok(created.CorrelationID, result))
		if !out.Won || watched.Status != store.Delivered {
			t.Fatalf("Finish = %+v after a read of %+v", out, watched)
		}
		check("Finish", out.Record)
		check("Get after Finish", get(t, a, created.CorrelationID))
		check("Get after Finish, elsewhere", get(t, b, created.CorrelationID))
		again, err := a.GetWatched(ctx(t), created.CorrelationID)
		if err != nil {
			t.Fatalf("GetWatched: %v", err)
		}
		check("GetWatched after Finish", again)
		check("a second Finish", finish(t, a, created.CorrelationID, ok(created.CorrelationID, `"late"`)).Record)
		for _, w := range []struct {
			name string
			ch   <-chan store.Record
		}{{"Watch of the instance that recorded it", done}, {"Watch of the instance that finished it", otherDone}} {
			select {
			case got := <-w.ch:
				if got.CorrelationID != "" { // else read it again, as a waiter does
					check(w.name, got)
				}
			case <-time.After(wait):
				t.Fatalf("%s: no notification within %s", w.name, wait)
			}
		}
	})
	t.Run("PutRefusesWhatNeedsCreate", func(t *testing.T) {
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
	})
	t.Run("CreateDeliveredQueuesBehindQueuedCalls", func(t *testing.T) {
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
	})
	t.Run("CreateDeliveredKeepsIdempotencyAndTakenIDs", func(t *testing.T) {
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
	})
	t.Run("ConcurrentClaimsDeliverEachCallOnce", func(t *testing.T) {
		a, b := pair(t, store.Options{})
		const n = 200
		for range n {
			create(t, a, newCall("ws-race", time.Minute))
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for i := range 8 {
			s := []store.Store{a, b}[i%2]
			wg.Go(func() {
				for {
					recs, err := s.Claim(context.Background(), "ws-race", time.Now(), 3)
					if err != nil {
						t.Error(err)
						return
					}
					if len(recs) == 0 {
						return
					}
					mu.Lock()
					for _, r := range recs {
						seen[r.CorrelationID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("%d calls claimed, want %d", len(seen), n)
		}
		for cid, k := range seen {
			if k != 1 {
				t.Fatalf("%s claimed %d times", cid, k)
			}
		}
	})
	t.Run("ClaimPassesOverEndedAndLateCalls", func(t *testing.T) {
		a, _ := pair(t, store.Options{})
		cancelled := create(t, a, newCall("ws-skip", time.Minute))
		finish(t, a, cancelled.CorrelationID, protocol.Failure("", protocol.CodeCancelled, "by the test"))
		short := newCall("ws-skip", time.Second)
		create(t, a, short)
		waiting := newCall("ws-skip", time.Minute)
		waiting.OfflineAt = waiting.CreatedAt.Add(time.Second)
		create(t, a, waiting)
		fresh := create(t, a, newCall("ws-skip", time.Minute))
		later := time.Now().Add(2 * time.Second) // past the short deadline and the wait
		if got := claim(t, a, "ws-skip", later, 10); fmt.Sprint(got) != fmt.Sprint([]string{fresh.CorrelationID}) {
			t.Fatalf("claimed %v, want only %s", got, fresh.CorrelationID)
		}
		// The late ones are still queued until Sweep ends them.
		if n := sweep(t, a, later); n != 2 {
			t.Fatalf("Sweep ended %d calls, want 2", n)
		}
		for _, c := range []struct {
			cid, code string
		}{{short.CorrelationID, protocol.CodeTimeout}, {waiting.CorrelationID, protocol.CodeWorkspaceOffline}} {
			rec := get(t, a, c.cid)
			if rec.Status != store.Failed || rec.Response == nil || rec.Response.Error != c.code || rec.Response.CorrelationID != c.cid {
				t.Fatalf("%s: %+v %+v, want failed %s", c.cid, rec, rec.Response, c.code)
			}
		}
	})
	t.Run("FinishWritesTheOutcomeOnce", func(t *testing.T) {
		a, b := pair(t, store.Options{})
		rec := create(t, a, newCall("ws", time.Minute))
		claim(t, a, "ws", time.Now(), 1)
		var wins atomic.Int64
		var wg sync.WaitGroup
		outcomes := make([]store.Outcome, 16)
		for i := range outcomes {
			s := []store.Store{a, b}[i%2]
			wg.Go(func() {
				resp := ok(rec.CorrelationID, fmt.Sprintf(`{"by":%d}`, i))
				if i%3 == 0 {
					resp = protocol.Failure(rec.CorrelationID, protocol.CodeCancelled, "cancel")
				}
				out, err := s.Finish(context.Background(), rec.CorrelationID, resp, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				if out.Won {
					wins.Add(1)
					if out.Was != store.Delivered {
						t.Errorf("winner saw status %q before, want delivered", out.Was)
					}
				}
				outcomes[i] = out
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d Finish calls won, want 1", wins.Load())
		}
		stored := get(t, b, rec.CorrelationID)
		for i, out := range outcomes {
			if out.Record.Status != stored.Status || out.Record.Response == nil || string(out.Record.Response.Result) != string(stored.Response.Result) || out.Record.Response.Error != stored.Response.Error {
				t.Fatalf("Finish %d saw %+v, stored %+v", i, out.Record.Response, stored.Response)
			}
		}
		if stored.FinishedAt == nil || !store.IsFinal(stored.Status) {
			t.Fatalf("stored %+v", stored)
		}
		if n := sweep(t, a, time.Now().Add(2*time.Minute)); n != 0 {
			t.Fatalf("Sweep ended %d calls that had an outcome", n)
		}
	})
	t.Run("FinishGivesTheStatusOfTheResponse", func(t *testing.T) {
		a, _ := pair(t, store.Options{})
		for _, c := range []struct {
			resp protocol.ToolResponse
			want string
		}{
			{ok("", `{"exit_code":0}`), store.Succeeded},
			{protocol.Failure("", protocol.CodeTimeout, "late"), store.Failed},
			{protocol.Failure("", protocol.CodeCancelled, "stop"), store.Cancelled},
		} {
			rec := create(t, a, newCall("ws-st", time.Minute))
			out := finish(t, a, rec.CorrelationID, c.resp)
			got := get(t, a, rec.CorrelationID)
			if !out.Won || out.Was != store.Queued || got.Status != c.want || got.Response.CorrelationID != rec.CorrelationID ||
				got.Response.Error != c.resp.Error || string(got.Response.Result) != string(c.resp.Result) {
				t.Fatalf("%+v: outcome %+v, record %+v %+v; want %s", c.resp, out, got, got.Response, c.want)
			}
		}
	})
	t.Run("CallEndedWhileQueuedIsNeverClaimed", func(t *testing.T) {
		a, b := pair(t, store.Options{})
		rec := create(t, a, newCall("ws-c", time.Minute))
		if out := finish(t, b, rec.CorrelationID, protocol.Failure("", protocol.CodeCancelled, "x")); !out.Won || out.Was != store.Queued {
			t.Fatalf("cancel: %+v", out)
		}
		if got := claim(t, a, "ws-c", time.Now(), 10); len(got) != 0 {
			t.Fatalf("claimed %v", got)
		}
	})
	t.Run("WithdrawEndsOnlyAQueuedCall", func(t *testing.T) {
		a, b := pair(t, store.Options{})
		offline := protocol.Failure("", protocol.CodeWorkspaceOffline, "nobody")
		queued := create(t, a, newCall("ws-wd", time.Minute))
		out, err := b.Withdraw(ctx(t), queued.CorrelationID, offline, time.Now())
		if err != nil || !out.Won || out.Was != store.Queued || out.Record.Status != store.Failed {
			t.Fatalf("withdrawing a queued call: %+v, %v", out, err)
		}
		claimed := create(t, a, newCall("ws-wd", time.Minute))
		claim(t, a, "ws-wd", time.Now(), 10)
		out, err = b.Withdraw(ctx(t), claimed.CorrelationID, offline, time.Now())
		if err != nil || out.Won || out.Record.Status != store.Delivered {
			t.Fatalf("withdrawing a claimed call: %+v, %v; want it left delivered", out, err)
		}
		if out := finish(t, a, claimed.CorrelationID, ok("", "1")); !out.Won {
			t.Fatalf("the claimed call's own outcome lost: %+v", out)
		}
		if _, err := b.Withdraw(ctx(t), "never-made", offline, time.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Withdraw of an unknown call = %v", err)
		}
	})
	t.Run("SweepEndsDeliveredCallsAtDeadlinePlusGrace", func(t *testing.T) {
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
	})
	t.Run("SweepEndsQueuedCallsAtTheirWaitOrDeadline", func(t *testing.T) {
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
	})
	t.Run("OfflineAtPastTheDeadlineMeansTheDeadline", func(t *testing.T) {
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
	})
	t.Run("WatchFiresOnAnOutcomeFromAnyInstance", func(t *testing.T) {
		a, b := pair(t, store.Options{})
		for _, end := range []string{"finish here", "finish there", "sweep"} {
			rec := create(t, a, newCall("ws-watch", time.Second))
			done, stop := a.Watch(rec.CorrelationID)
			other, stopOther := a.Watch("another-call")
			switch end {
			case "finish here":
				finish(t, a, rec.CorrelationID, ok("", "1"))
			case "finish there":
				finish(t, b, rec.CorrelationID, ok("", "1"))
			default:
				sweep(t, b, rec.Deadline)
			}
			select {
			case got := <-done:
				// The record itself, or an empty one: read it again.
				if got.CorrelationID != "" && (got.CorrelationID != rec.CorrelationID || !store.IsFinal(got.Status)) {
					t.Fatalf("%s: notified with %+v", end, got)
				}
				if end == "finish here" && got.Status != store.Succeeded {
					t.Fatalf("the instance that wrote the outcome notified %+v, want the record", got)
				}
			case <-time.After(wait):
				t.Fatalf("%s: no notification within %s", end, wait)
			}
			select {
			case <-other:
				t.Fatalf("%s notified another call's watch", end)
			default:
			}
			stop()
			stop()
			stopOther()
		}
	})
	t.Run("WatchFiresForAnInstanceThatReadsToWait", func(t *testing.T) {
		// b did not record the call: it watches, then reads the record as
		// a wait does (GetWatched), and is told of the outcome a writes, or
		// a's sweep.
		a, b := pair(t, store.Options{})
		for _, end := range []string{"finish", "withdraw", "sweep"} {
			rec := create(t, a, newCall("ws-watch-other", time.Second))
			done, stop := b.Watch(rec.CorrelationID)
			got, err := b.GetWatched(ctx(t), rec.CorrelationID)
			if err != nil || got.Status != store.Queued {
				t.Fatalf("%s: read to wait = %+v, %v", end, got, err)
			}
			switch end {
			case "finish":
				finish(t, a, rec.CorrelationID, ok("", "1"))
			case "withdraw":
				if out, err := a.Withdraw(ctx(t), rec.CorrelationID, protocol.Failure(rec.CorrelationID, protocol.CodeWorkspaceOffline, "x"), time.Now()); err != nil || !out.Won {
					t.Fatalf("Withdraw = %+v, %v", out, err)
				}
			default:
				sweep(t, a, rec.Deadline)
			}
			select {
			case got := <-done:
				if got.CorrelationID != "" && !store.IsFinal(got.Status) {
					t.Fatalf("%s: notified with %+v", end, got)
				}
			case <-time.After(wait):
				t.Fatalf("%s: the instance that read the call to wait was not told within %s", end, wait)
			}
			stop()
		}
		// Reading a final call to wait for it, or a call never made,
		// changes nothing.
		rec := create(t, a, newCall("ws-watch-other", time.Second))
		finish(t, a, rec.CorrelationID, ok("", "1"))
		if got, err := b.GetWatched(ctx(t), rec.CorrelationID); err != nil || got.Status != store.Succeeded {
			t.Fatalf("read to wait of a final call = %+v, %v", got, err)
		}
		if _, err := b.GetWatched(ctx(t), "never-made"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("read to wait of a call never made: %v, want ErrNotFound", err)
		}
	})
	t.Run("RecordIsForgottenAfterItsRetention", func(t *testing.T) {
		a, b := pair(t, store.Options{Retention: 300 * time.Millisecond})
		rec := newCall("ws-r", time.Minute)
		rec.IdempotencyKey = "forget-me"
		create(t, a, rec)
		finish(t, a, rec.CorrelationID, ok("", "1"))
		get(t, b, rec.CorrelationID)
		deadline := time.Now().Add(wait)
		for {
			_, _ = b.Sweep(ctx(t), time.Now(), 100) // Memory forgets in Sweep (and on read)
			_, err := b.Get(ctx(t), rec.CorrelationID)
			if errors.Is(err, store.ErrNotFound) {
				break
			}
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("record still there %s after its retention: %v", wait, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Its idempotency key is free again.
		again := newCall("ws-r", time.Minute)
		again.IdempotencyKey = "forget-me"
		create(t, b, again)
	})
	t.Run("UnfinishedRecordLivesUntilDeadlinePlusRetention", func(t *testing.T) {
		a, _ := pair(t, store.Options{Retention: 500 * time.Millisecond, Grace: 100 * time.Millisecond})
		rec := create(t, a, newCall("ws-u", 200*time.Millisecond))
		time.Sleep(time.Until(rec.Deadline.Add(400 * time.Millisecond)))
		get(t, a, rec.CorrelationID) // deadline + grace + retention is not here yet
		deadline := time.Now().Add(wait)
		for {
			_, err := a.Get(ctx(t), rec.CorrelationID)
			if errors.Is(err, store.ErrNotFound) {
				if time.Now().Before(rec.Deadline.Add(600 * time.Millisecond)) {
					t.Fatalf("forgotten before deadline + grace + retention")
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("never forgotten")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("ClosedStoreRefuses", func(t *testing.T) {
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
	})
}
