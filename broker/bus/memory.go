package bus

import (
	"context"
	"sync"
	"sync/atomic"
)

// Memory is the in-process Bus used when tether runs without Redis. Publish
// calls handlers synchronously in the publisher's goroutine, so delivery is
// immediate and ordered per publisher.
type Memory struct {
	mu     sync.RWMutex
	subs   map[string][]*memorySub
	closed bool
}

var (
	_ Bus       = (*Memory)(nil)
	_ InProcess = (*Memory)(nil)
)

// NewMemory returns an empty in-process bus.
func NewMemory() *Memory {
	return &Memory{subs: make(map[string][]*memorySub)}
}

type memorySub struct {
	bus     *Memory
	channel string
	h       Handler

	done atomic.Bool
}

// InProcess implements InProcess: every subscriber is in this process and
// Publish delivers before it returns.
func (m *Memory) InProcess() bool { return true }

// Publish implements Bus.
func (m *Memory) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return 0, ErrClosed
	}
	subs := m.subs[channel]
	m.mu.RUnlock()
	n := 0
	for i, s := range subs {
		body := msg
		if i < len(subs)-1 {
			body = append([]byte(nil), msg...) // each handler owns its copy
		}
		if s.deliver(body) {
			n++
		}
	}
	return n, nil
}

// PublishAsync implements Bus: the in-memory bus delivers at once, so done
// runs before it returns.
func (m *Memory) PublishAsync(channel string, msg []byte, done func(int, error)) {
	n, err := m.Publish(context.Background(), channel, append([]byte(nil), msg...))
	done(n, err)
}

func (s *memorySub) deliver(msg []byte) bool {
	if s.done.Load() {
		return false
	}
	s.h(msg)
	return true
}

// Subscribe implements Bus.
func (m *Memory) Subscribe(ctx context.Context, channel string, h Handler) (Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &memorySub{bus: m, channel: channel, h: h}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	// Copy on write: Publish iterates a slice it read under the lock.
	old := m.subs[channel]
	next := make([]*memorySub, len(old), len(old)+1)
	copy(next, old)
	m.subs[channel] = append(next, s)
	return s, nil
}

// Unsubscribe implements Subscription.
func (s *memorySub) Unsubscribe(ctx context.Context) error {
	s.done.Store(true)
	s.bus.remove(s)
	return nil
}

func (m *Memory) remove(s *memorySub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.subs[s.channel]
	next := make([]*memorySub, 0, len(old))
	for _, o := range old {
		if o != s {
			next = append(next, o)
		}
	}
	if len(next) == 0 {
		delete(m.subs, s.channel)
	} else {
		m.subs[s.channel] = next
	}
}

// Close implements Bus.
func (m *Memory) Close() error {
	m.mu.Lock()
	subs := m.subs
	m.subs = map[string][]*memorySub{}
	m.closed = true
	m.mu.Unlock()
	for _, list := range subs {
		for _, s := range list {
			s.done.Store(true)
		}
	}
	return nil
}
