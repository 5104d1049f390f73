package broker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/protocol"
)

// plainBus is a bus.Bus and nothing more: it forwards the methods of
// bus.Bus to a memory bus and hides its optional interfaces (bus.InProcess),
// so a broker on it takes the general path that a Redis bus gets: calls and
// replies through Publish and Subscribe, no in-process shortcut.
type plainBus struct{ inner bus.Bus }

var _ bus.Bus = plainBus{}

func (p plainBus) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	return p.inner.Publish(ctx, channel, msg)
}

func (p plainBus) PublishAsync(channel string, msg []byte, done func(int, error)) {
	p.inner.PublishAsync(channel, msg, done)
}

func (p plainBus) Subscribe(ctx context.Context, channel string, h bus.Handler) (bus.Subscription, error) {
	return p.inner.Subscribe(ctx, channel, h)
}

func (p plainBus) Close() error { return p.inner.Close() }

// eachPath runs f three times, with mk making its env: on a broker with its
// own memory bus (the in-process fast path); on one whose bus is a plainBus,
// called on that broker, which holds the workspace and hands it the call
// itself (Broker.localHolder), as a broker on Redis does; and on the
// plainBus called through a second broker on the same bus (e.api), so the
// call and its answer go through Publish and Subscribe, the general path.
// The tests of every outcome of a call (answer, offline, timeout with
// tool_cancel, disconnect, shutdown, overload) run on all three, with the
// same assertions.
func eachPath(t *testing.T, f func(t *testing.T, mk func(t *testing.T, mutate ...func(*broker.Config)) *env)) {
	t.Run("fast path", func(t *testing.T) {
		f(t, newEnv)
	})
	onPlain := func(t *testing.T) func(*broker.Config) {
		if _, fast := bus.Bus(plainBus{}).(bus.InProcess); fast {
			t.Fatal("plainBus offers the fast path")
		}
		mem := bus.NewMemory()
		t.Cleanup(func() { _ = mem.Close() }) // after the brokers' shutdown
		return func(c *broker.Config) { c.Bus = plainBus{mem} }
	}
	t.Run("plain bus", func(t *testing.T) {
		on := onPlain(t)
		f(t, func(t *testing.T, mutate ...func(*broker.Config)) *env {
			return newEnv(t, append([]func(*broker.Config){on}, mutate...)...)
		})
	})
	t.Run("plain bus, other instance", func(t *testing.T) {
		on := onPlain(t)
		f(t, func(t *testing.T, mutate ...func(*broker.Config)) *env {
			mutate = append([]func(*broker.Config){on}, mutate...)
			e := newEnv(t, mutate...)
			e.api = newEnv(t, append(mutate, func(c *broker.Config) { c.InstanceID = "api" })...).srv.URL
			return e
		})
	})
}

// countingBus is a plainBus that counts what is published on each channel.
type countingBus struct {
	plainBus
	mu        sync.Mutex
	published map[string]int
}

func (c *countingBus) count(channel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.published == nil {
		c.published = map[string]int{}
	}
	c.published[channel]++
}

func (c *countingBus) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	c.count(channel)
	return c.plainBus.Publish(ctx, channel, msg)
}

func (c *countingBus) PublishAsync(channel string, msg []byte, done func(int, error)) {
	c.count(channel)
	c.plainBus.PublishAsync(channel, msg, done)
}

func (c *countingBus) publishedOn(channel string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.published[channel]
}

// TestCallToAWorkspaceHeldHereSkipsTheBus: on a bus that is not in-process
// (as Redis), a broker that holds the workspace hands its API's call to the
// connection itself: nothing is published on the workspace channel, and the
// same call through another instance is.
func TestCallToAWorkspaceHeldHereSkipsTheBus(t *testing.T) {
	mem := bus.NewMemory()
	t.Cleanup(func() { _ = mem.Close() })
	counted := &countingBus{plainBus: plainBus{mem}}
	onBus := func(c *broker.Config) { c.Bus = counted }
	e := newEnv(t, onBus)
	other := newEnv(t, onBus, func(c *broker.Config) { c.InstanceID = "other" })
	c := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	tok := e.token(auth.RoleCaller, "ws1")
	channel := protocol.WorkspaceChannel("ws1")
	before := counted.publishedOn(channel) // the takeover
	for i, url := range []string{e.srv.URL, other.srv.URL} {
		res := make(chan callResult, 1)
		go func() {
			status, resp := e.httpCallTo(url, "ws1", tok, `{"endpoint":"/api/ping","timeout":5}`)
			res <- callResult{status: status, resp: resp}
		}()
		c.ackOK(c.nextCall(), `{"pong":true}`)
		if got := awaitResult(t, res, 5*time.Second); !got.resp.Success {
			t.Fatalf("call %d: %+v", i, got.resp)
		}
		if n, want := counted.publishedOn(channel)-before, i; n != want {
			t.Fatalf("after call %d (via %s): %d publishes on %s, want %d", i, map[int]string{0: "the holder's broker", 1: "the other broker"}[i], n, channel, want)
		}
	}
}
