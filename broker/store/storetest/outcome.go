package storetest

import (
	"context"
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

// Writing outcomes: Finish and Withdraw.

func outcomeKeepsTheResultByteForByte(t *testing.T, pair Pair) {
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
}

func finishWritesTheOutcomeOnce(t *testing.T, pair Pair) {
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
}

func finishGivesTheStatusOfTheResponse(t *testing.T, pair Pair) {
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
}

func withdrawEndsOnlyAQueuedCall(t *testing.T, pair Pair) {
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
}
