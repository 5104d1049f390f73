package caller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// busPair returns the bus a workspace owner uses and the one the caller
// uses: on Redis two instances (like a broker and a worker process) on one
// server with a prefix of the test's own; in memory one bus.
type busPair func(t *testing.T) (owner, callers bus.Bus)

// eachBus runs f on the in-memory bus and on Redis.
func eachBus(t *testing.T, f func(t *testing.T, pair busPair)) {
	t.Run("memory", func(t *testing.T) {
		f(t, func(t *testing.T) (bus.Bus, bus.Bus) {
			m := bus.NewMemory()
			t.Cleanup(func() { _ = m.Close() })
			return m, m
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		f(t, func(t *testing.T) (bus.Bus, bus.Bus) {
			prefix := uniquePrefix(t)
			return newRedis(t, srv.URL(), prefix), newRedis(t, srv.URL(), prefix)
		})
	})
}

var prefixSeq atomic.Int64

func uniquePrefix(t *testing.T) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test:%s:%d:%d:", name, time.Now().UnixNano(), prefixSeq.Add(1))
}

// newRedis returns a Redis bus closed in t.Cleanup.
func newRedis(t *testing.T, url, prefix string) *bus.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.NewRedis(ctx, bus.RedisConfig{URL: url, Prefix: prefix, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing redis bus: %v", err)
		}
	})
	return b
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)
}

// newCaller returns a caller.BusCaller closed in t.Cleanup.
func newCaller(t *testing.T, b bus.Bus, grace time.Duration) *caller.BusCaller {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := caller.NewBusCaller(ctx, b, caller.BusCallerOptions{Grace: grace, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("NewBusCaller: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing caller: %v", err)
		}
	})
	return c
}

// fakeOwner stands in for the broker instance that holds a workspace: it
// subscribes the workspace channel and answers each call on its reply_to as
// the broker would, by what answer returns for it (nil: stay silent; a
// positive delay: answer that much later). It speaks the bus protocol of
// docs/redis-protocol.md and nothing more; the real broker is exercised by
// the e2e tests.
type fakeOwner struct {
	t      *testing.T
	bus    bus.Bus
	sub    bus.Subscription
	answer func(call protocol.ToolCall) (resp *protocol.ToolResponse, delay time.Duration)

	work chan ownerReply
	wg   sync.WaitGroup
	stop chan struct{}

	calls   atomic.Int64
	cancels atomic.Int64
	mu      sync.Mutex
	seen    []protocol.BusMessage // only while record is set
	record  bool
}

type ownerReply struct {
	to   string
	body []byte
	at   time.Time
}

// echo answers every call with its payload.
func echo(call protocol.ToolCall) (*protocol.ToolResponse, time.Duration) {
	r := protocol.Success(call.CorrelationID, call.Payload)
	return &r, 0
}

func silent(protocol.ToolCall) (*protocol.ToolResponse, time.Duration) { return nil, 0 }

func startOwner(t *testing.T, b bus.Bus, ws string, answer func(protocol.ToolCall) (*protocol.ToolResponse, time.Duration)) *fakeOwner {
	t.Helper()
	o := &fakeOwner{t: t, bus: b, answer: answer, work: make(chan ownerReply, 1<<16), stop: make(chan struct{})}
	// Replies go out from workers, never from the bus handler, which must
	// not block (bus.Handler).
	for range 8 {
		o.wg.Go(o.replier)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := b.Subscribe(ctx, protocol.WorkspaceChannel(ws), o.onMessage)
	if err != nil {
		t.Fatalf("owner subscribing: %v", err)
	}
	o.sub = sub
	t.Cleanup(o.close)
	return o
}

func (o *fakeOwner) onMessage(msg []byte) {
	var m protocol.BusMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		o.t.Errorf("owner got undecodable message %q: %v", msg, err)
		return
	}
	o.mu.Lock()
	if o.record {
		o.seen = append(o.seen, m)
	}
	o.mu.Unlock()
	switch m.Type {
	case protocol.BusCancel:
		o.cancels.Add(1)
		return
	case protocol.BusCall:
	default:
		return
	}
	o.calls.Add(1)
	if m.ReplyTo == "" || m.DeadlineMS == 0 {
		o.t.Errorf("call without reply_to or deadline_ms: %s", msg)
		return
	}
	resp, delay := o.answer(m.ToolCall)
	if resp == nil {
		return
	}
	resp.CorrelationID = m.CorrelationID
	body, _ := json.Marshal(resp)
	select {
	case o.work <- ownerReply{to: m.ReplyTo, body: body, at: time.Now().Add(delay)}:
	default:
		o.t.Errorf("owner reply queue full")
	}
}

func (o *fakeOwner) replier() {
	for {
		select {
		case <-o.stop:
			return
		case r := <-o.work:
			if d := time.Until(r.at); d > 0 {
				select {
				case <-time.After(d):
				case <-o.stop:
					return
				}
			}
			_, _ = o.bus.Publish(context.Background(), r.to, r.body)
		}
	}
}

// close unsubscribes and stops the repliers: the owner is gone.
func (o *fakeOwner) close() {
	select {
	case <-o.stop:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = o.sub.Unsubscribe(ctx)
	close(o.stop)
	o.wg.Wait()
}

// recordAll makes the owner keep every message it receives in seen.
func (o *fakeOwner) recordAll() {
	o.mu.Lock()
	o.record = true
	o.mu.Unlock()
}

// waitCalls waits until the owner has received n calls.
func (o *fakeOwner) waitCalls(t *testing.T, n int64) {
	t.Helper()
	testwait.Until(t, 10*time.Second, func() bool { return o.calls.Load() >= n }, "the owner to receive %d calls", n)
}
