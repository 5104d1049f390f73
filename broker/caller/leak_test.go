package caller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// TestBusRedisLeavesNoWaitersAfter100kCalls is nats.go's
// TestRequestLeaksMapEntries for tether: 100,000 calls over Redis that end
// every way a call can end (answered, offline, cancelled by the caller,
// timed out with the answer arriving later, timed out with no answer at
// all) leave the waiter map empty, and every late answer is counted as
// unmatched instead of answering anything.
func TestBusRedisLeavesNoWaitersAfter100kCalls(t *testing.T) {
	total := 100_000
	if testing.Short() {
		total = 10_000
	}
	const (
		workers   = 400
		callTime  = 100 * time.Millisecond // the timeout of the calls that are not answered in time
		grace     = time.Millisecond
		lateAfter = 400 * time.Millisecond // how late the owner answers /late
		budget    = 3 * time.Minute
	)
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	ownerBus := newRedis(t, srv.URL(), prefix)
	startOwner(t, ownerBus, "w", func(call protocol.ToolCall) (*protocol.ToolResponse, time.Duration) {
		switch call.Endpoint {
		case "/echo":
			return echo(call)
		case "/late":
			r := protocol.Success(call.CorrelationID, json.RawMessage(`"late"`))
			return &r, lateAfter
		}
		return nil, 0 // /silent
	})
	c := newCaller(t, newRedis(t, srv.URL(), prefix), grace)

	// Ten kinds of call, by i%10.
	kind := func(i int) (req caller.Request, cancelAfter time.Duration, want string) {
		req = caller.Request{WorkspaceID: "w", Endpoint: "/echo", Payload: json.RawMessage(fmt.Sprint(i)), Timeout: 10 * time.Second}
		switch i % 10 {
		case 4, 5:
			req.WorkspaceID = "nobody"
			return req, 0, protocol.CodeWorkspaceOffline
		case 6:
			req.Endpoint = "/silent"
			return req, 20 * time.Millisecond, protocol.CodeCancelled
		case 7:
			req.Endpoint, req.Timeout = "/late", callTime
			return req, 0, protocol.CodeTimeout
		case 8:
			req.Endpoint, req.Timeout = "/silent", callTime
			return req, 0, protocol.CodeTimeout
		}
		return req, 0, ""
	}

	start := time.Now()
	stop := start.Add(budget)
	var next atomic.Int64
	var late, done atomic.Int64
	var wg sync.WaitGroup
	var failOnce sync.Once
	fail := func(format string, args ...any) { failOnce.Do(func() { t.Errorf(format, args...) }) }
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total || time.Now().After(stop) {
					return
				}
				req, cancelAfter, want := kind(i)
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if cancelAfter > 0 {
					ctx, cancel = context.WithTimeout(ctx, cancelAfter)
				}
				resp := c.Call(ctx, req)
				cancel()
				done.Add(1)
				switch {
				case want == "" && (!resp.Success || string(resp.Result) != fmt.Sprint(i)):
					fail("call %d got %+v, want its payload back", i, resp)
				case want != "" && resp.Error != want:
					fail("call %d (%s to %s) got %+v, want %s", i, req.Endpoint, req.WorkspaceID, resp, want)
				}
				if req.Endpoint == "/late" && resp.Error == protocol.CodeTimeout {
					late.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := done.Load(); n != int64(total) {
		t.Fatalf("%d of %d calls done within %v", n, total, budget)
	}
	if p := c.Pending(); p != 0 {
		t.Fatalf("%d waiters left after %d calls", p, total)
	}
	// The late answers are still on their way; each must find no waiter.
	testwait.Within(lateAfter+10*time.Second, func() bool { return c.Unmatched() >= late.Load() })
	if u := c.Unmatched(); u != late.Load() {
		t.Fatalf("%d replies unmatched, want the %d late ones", u, late.Load())
	}
	if p := c.Pending(); p != 0 {
		t.Fatalf("%d waiters left after the late replies", p)
	}
	t.Logf("%d calls in %v (%.0f calls/s), %d late replies dropped", total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), late.Load())
}
