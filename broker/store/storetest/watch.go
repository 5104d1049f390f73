package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Watch: being told of outcomes.

func watchFiresOnAnOutcomeFromAnyInstance(t *testing.T, pair Pair) {
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
}

func watchFiresForAnInstanceThatReadsToWait(t *testing.T, pair Pair) {
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
}
