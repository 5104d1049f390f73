package caller_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// The async side of BusCaller against a real store, without a broker: what
// Submit records, the drain message it publishes, and Status, Wait and
// Cancel on the record. The broker's side (claiming, delivering, recording
// the outcome) is tested in the broker package and end to end.

// asyncEnv is a caller with a store and, on the same bus and store, what a
// broker holding a workspace would see.
type asyncEnv struct {
	bus    bus.Bus // the holder's side
	store  store.Store
	c      *caller.BusCaller
	direct bool // the store hands new calls to the holder (Redis, one server)
}

// eachStore runs f on the in-memory bus and store and on Redis.
func eachStore(t *testing.T, f func(t *testing.T, e asyncEnv)) {
	t.Run("memory", func(t *testing.T) {
		m := bus.NewMemory()
		t.Cleanup(func() { _ = m.Close() })
		st := store.NewMemory(store.Options{})
		t.Cleanup(func() { _ = st.Close() })
		f(t, asyncEnv{bus: m, store: st, c: newAsyncCaller(t, m, st)})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		prefix := uniquePrefix(t)
		cb := newRedis(t, srv.URL(), prefix)
		st := newRedisStore(t, srv.URL(), prefix, cb)
		f(t, asyncEnv{bus: newRedis(t, srv.URL(), prefix), store: st, c: newAsyncCaller(t, cb, st), direct: true})
	})
}

// newRedisStore is the store on Redis for a caller on bus b, closed in
// t.Cleanup.
func newRedisStore(t *testing.T, url, prefix string, b bus.Bus) *store.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.NewRedis(ctx, store.RedisConfig{URL: url, Prefix: prefix, Bus: b})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newAsyncCaller(t *testing.T, b bus.Bus, st store.Store) *caller.BusCaller {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := caller.NewBusCaller(ctx, b, caller.BusCallerOptions{Logger: testLogger(t), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func code(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// TestAsyncSubmitToAServedWorkspaceReachesTheHolder: the holder hears of the
// call: in memory it is queued and the holder told to drain the queue; on a
// single Redis server the store hands it the call itself, recorded
// delivered.
func TestAsyncSubmitToAServedWorkspaceReachesTheHolder(t *testing.T) {
	eachStore(t, func(t *testing.T, e asyncEnv) {
		drains := make(chan protocol.BusMessage, 4)
		sub, err := e.bus.Subscribe(context.Background(), protocol.WorkspaceChannel("w-served"), func(msg []byte) {
			var m protocol.BusMessage
			_ = protocol.DecodeBusMessage(msg, &m)
			drains <- m
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe(context.Background()) })
		rec, err := e.c.Submit(context.Background(), caller.Request{WorkspaceID: "w-served", Endpoint: "/api/ping", Payload: json.RawMessage(`{"a":1}`), Timeout: 5 * time.Second})
		want := store.Queued
		if e.direct {
			want = store.Delivered
		}
		if err != nil || rec.Status != want || rec.CorrelationID == "" {
			t.Fatalf("Submit = %+v, %v; want %s", rec, err, want)
		}
		var m protocol.BusMessage
		select {
		case m = <-drains:
		case <-time.After(5 * time.Second):
			t.Fatal("the holder was not told")
		}
		claimed, err := e.store.Claim(context.Background(), "w-served", time.Now(), 10)
		if e.direct {
			if m.Type != protocol.BusCall || !m.Async || m.CorrelationID != rec.CorrelationID || string(m.Payload) != `{"a":1}` || m.DeadlineMS != rec.Deadline.UnixMilli() || m.ReplyTo != "" {
				t.Fatalf("holder got %+v, want the async call", m)
			}
			if err != nil || len(claimed) != 0 {
				t.Fatalf("a call handed to the holder was also queued: %+v, %v", claimed, err)
			}
		} else {
			if m.Type != protocol.BusDrain {
				t.Fatalf("holder got %+v, want a drain message", m)
			}
			if err != nil || len(claimed) != 1 || claimed[0].CorrelationID != rec.CorrelationID || string(claimed[0].Payload) != `{"a":1}` {
				t.Fatalf("Claim = %+v, %v", claimed, err)
			}
		}
		// Wait ends at its bound with the status then.
		start := time.Now()
		got, err := e.c.Wait(context.Background(), rec.CorrelationID, 200*time.Millisecond)
		if err != nil || got.Status != store.Delivered || time.Since(start) < 200*time.Millisecond {
			t.Fatalf("Wait = %+v, %v after %s", got, err, time.Since(start))
		}
		// An outcome written elsewhere ends a Wait at once. It is written
		// once the Wait has its first look at the record (the check of the
		// record WaitFor runs then), so the Wait learns of it by its watch,
		// not by that look.
		start = time.Now()
		got, err = e.c.WaitFor(context.Background(), rec.CorrelationID, 10*time.Second, func(seen *store.Record) error {
			if store.IsFinal(seen.Status) {
				t.Errorf("the first look at the record saw its outcome: %+v", seen)
			}
			_, err := e.store.Finish(context.Background(), rec.CorrelationID, protocol.Success("", json.RawMessage(`"done"`)), time.Now())
			return err
		})
		if err != nil || got.Status != store.Succeeded || string(got.Response.Result) != `"done"` || time.Since(start) > 2*time.Second {
			t.Fatalf("Wait = %+v, %v after %s", got, err, time.Since(start))
		}
	})
}

func TestAsyncSubmitToAnOfflineWorkspace(t *testing.T) {
	eachStore(t, func(t *testing.T, e asyncEnv) {
		rec, err := e.c.Submit(context.Background(), caller.Request{WorkspaceID: "w-off", Endpoint: "/api/ping"})
		if err != nil || rec.Status != store.Failed || rec.Response.Error != protocol.CodeWorkspaceOffline {
			t.Fatalf("without a wait: %+v, %v", rec, err)
		}
		rec, err = e.c.Submit(context.Background(), caller.Request{WorkspaceID: "w-off", Endpoint: "/api/ping", WaitForWorkspace: time.Minute})
		if err != nil || rec.Status != store.Queued {
			t.Fatalf("with a wait: %+v, %v", rec, err)
		}
		// Cancelled while queued: never claimed.
		got, err := e.c.Cancel(context.Background(), rec.CorrelationID)
		if err != nil || got.Status != store.Cancelled || got.Response.Error != protocol.CodeCancelled {
			t.Fatalf("Cancel = %+v, %v", got, err)
		}
		if claimed, err := e.store.Claim(context.Background(), "w-off", time.Now(), 10); err != nil || len(claimed) != 0 {
			t.Fatalf("claimed %+v, %v", claimed, err)
		}
		again, err := e.c.Cancel(context.Background(), rec.CorrelationID)
		if err != nil || again.Status != store.Cancelled || !again.FinishedAt.Equal(*got.FinishedAt) {
			t.Fatalf("second Cancel = %+v, %v", again, err)
		}
	})
}

func TestAsyncRefusalsAreCoded(t *testing.T) {
	eachStore(t, func(t *testing.T, e asyncEnv) {
		ctx := context.Background()
		for _, req := range []caller.Request{
			{WorkspaceID: "w", Endpoint: "no-slash"},
			{WorkspaceID: "", Endpoint: "/api/ping"},
			{WorkspaceID: "w", Endpoint: "/api/ping", Payload: json.RawMessage(`{`)},
			{WorkspaceID: "w", Endpoint: "/api/ping", WaitForWorkspace: -1},
		} {
			if _, err := e.c.Submit(ctx, req); code(err) != protocol.CodeInvalidRequest {
				t.Errorf("%+v: %v, want invalid_request", req, err)
			}
		}
		first, err := e.c.Submit(ctx, caller.Request{WorkspaceID: "w", Endpoint: "/api/ping", IdempotencyKey: "k", WaitForWorkspace: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		same, err := e.c.Submit(ctx, caller.Request{WorkspaceID: "w", Endpoint: "/api/ping", IdempotencyKey: "k", WaitForWorkspace: time.Minute})
		if err != nil || same.CorrelationID != first.CorrelationID {
			t.Fatalf("retry = %+v, %v; want call %s", same, err, first.CorrelationID)
		}
		if _, err := e.c.Submit(ctx, caller.Request{WorkspaceID: "w", Endpoint: "/api/other", IdempotencyKey: "k", WaitForWorkspace: time.Minute}); code(err) != protocol.CodeConflict {
			t.Fatalf("same key, other endpoint: %v, want conflict", err)
		}
		if _, err := e.c.Submit(ctx, caller.Request{WorkspaceID: "w", Endpoint: "/api/ping", CorrelationID: first.CorrelationID}); code(err) != protocol.CodeConflict {
			t.Fatalf("taken id: %v, want conflict", err)
		}
		for name, f := range map[string]func() error{
			"Status": func() error { _, err := e.c.Status(ctx, "nope"); return err },
			"Wait":   func() error { _, err := e.c.Wait(ctx, "nope", time.Second); return err },
			"Cancel": func() error { _, err := e.c.Cancel(ctx, "nope"); return err },
		} {
			if err := f(); code(err) != protocol.CodeCallNotFound {
				t.Errorf("%s of an unknown id: %v, want call_not_found", name, err)
			}
		}
		plain := newCaller(t, e.bus, 0)
		if _, err := plain.Submit(ctx, caller.Request{WorkspaceID: "w", Endpoint: "/api/ping"}); code(err) != protocol.CodeInvalidRequest {
			t.Fatalf("Submit without a store: %v", err)
		}
	})
}

func TestAsyncSubmitWithTheStoreDownIsBusUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	cb := newRedis(t, srv.URL(), prefix)
	c := newAsyncCaller(t, cb, newRedisStore(t, srv.URL(), prefix, cb))
	srv.Stop()
	start := time.Now()
	_, err := c.Submit(context.Background(), caller.Request{WorkspaceID: "w", Endpoint: "/api/ping"})
	if code(err) != protocol.CodeBusUnavailable || time.Since(start) > time.Second {
		t.Fatalf("Submit with Redis down: %v after %s, want bus_unavailable at once", err, time.Since(start))
	}
}
