package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Claiming the queue.

func claimTakesQueuedCallsOldestFirst(t *testing.T, pair Pair) {
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
}

func concurrentClaimsDeliverEachCallOnce(t *testing.T, pair Pair) {
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
}

func claimPassesOverEndedAndLateCalls(t *testing.T, pair Pair) {
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
}

func callEndedWhileQueuedIsNeverClaimed(t *testing.T, pair Pair) {
	a, b := pair(t, store.Options{})
	rec := create(t, a, newCall("ws-c", time.Minute))
	if out := finish(t, b, rec.CorrelationID, protocol.Failure("", protocol.CodeCancelled, "x")); !out.Won || out.Was != store.Queued {
		t.Fatalf("cancel: %+v", out)
	}
	if got := claim(t, a, "ws-c", time.Now(), 10); len(got) != 0 {
		t.Fatalf("claimed %v", got)
	}
}
