package broker_test

import (
	"context"
	"testing"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/bus"
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

// eachPath runs f twice: on a broker with its own memory bus (the
// in-process fast path) and on one whose bus is a plainBus (the general
// path). f passes onPath to newEnv. The tests of every outcome of a call
// (answer, offline, timeout with tool_cancel, disconnect, shutdown,
// overload) run on both, with the same assertions.
func eachPath(t *testing.T, f func(t *testing.T, onPath func(*broker.Config))) {
	t.Run("fast path", func(t *testing.T) {
		f(t, func(*broker.Config) {})
	})
	t.Run("plain bus", func(t *testing.T) {
		if _, fast := bus.Bus(plainBus{}).(bus.InProcess); fast {
			t.Fatal("plainBus offers the fast path")
		}
		mem := bus.NewMemory()
		t.Cleanup(func() { _ = mem.Close() }) // after the broker's shutdown
		f(t, func(c *broker.Config) { c.Bus = plainBus{mem} })
	})
}
