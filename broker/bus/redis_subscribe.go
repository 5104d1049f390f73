package bus

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Subscribing: Subscribe, the subscription it returns, and the commands
// that start and end a channel on its pub/sub connection.

// Subscribe implements Bus. It returns once Redis confirmed the
// subscription; while Redis is unreachable it waits for it to come back,
// until ctx ends.
func (r *Redis) Subscribe(ctx context.Context, channel string, h Handler) (Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("subscribing to redis channel %q: %w", channel, err)
	}
	full := r.prefix + channel
	var addr string
	if r.topo != nil {
		var err error
		if addr, err = r.topo.nodeFor(ctx, full); err != nil {
			return nil, fmt.Errorf("subscribing to redis channel %q: %w", channel, err)
		}
	}
	s := &redisSub{r: r, name: channel, h: h}
	e := &entry{channel: full, sub: s}
	s.e = e

	// Find the first connection that does not carry this channel yet.
	r.mu.Lock()
	for {
		if r.closed {
			r.mu.Unlock()
			return nil, ErrClosed
		}
		if c := r.pickConnLocked(addr, full); c != nil {
			c.addLocked(e)
			break
		}
		// An earlier subscription of this channel is being ended; once
		// Redis confirms that, its connection is free again.
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("subscribing to redis channel %q: %w", channel, ctx.Err())
		case <-r.done:
			return nil, ErrClosed
		}
		r.mu.Lock()
	}
	r.mu.Unlock()

	r.sendSubscribe(e)

	for {
		r.mu.Lock()
		closed, ok, changed := r.closed, e.subscribed, r.changed
		r.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if ok {
			return s, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			s.done.Store(true)
			r.sendUnsubscribe(e)
			return nil, fmt.Errorf("subscribing to redis channel %q: %w", channel, ctx.Err())
		case <-r.done:
			return nil, ErrClosed
		}
	}
}

// pickConnLocked returns the connection to addr with the lowest index that
// does not carry channel, creating it if needed. It returns nil if the
// lowest one carries channel for a subscription that is being ended: the
// caller waits for that to finish rather than open another connection.
func (r *Redis) pickConnLocked(addr, channel string) *psConn {
	for k := 0; ; k++ {
		key := connKey{addr: addr, k: k}
		c := r.conns[key]
		if c == nil {
			return r.newConnLocked(key)
		}
		e := c.entries[channel]
		if e == nil {
			return c
		}
		if e.sub == nil {
			return nil
		}
	}
}

// redisSub is one Subscribe registration.
type redisSub struct {
	r    *Redis
	name string // channel without prefix
	h    Handler
	e    *entry
	done atomic.Bool // set first thing by Unsubscribe

	// A handler call in progress and the messages that arrived for this
	// subscription meanwhile: they wait for it, in order (see
	// psConn.receive).
	mu      sync.Mutex
	running bool
	backlog [][]byte
}

// enter claims the subscription's handler for msg; false means a handler
// of the subscription is running and msg waits in its backlog. The backlog
// has no count limit: handling a subscription's messages out of order would
// break what its user builds on that order (a broker's takeover splits a
// workspace's calls by it). It is bounded in time instead, by how long a
// handler can block: a broker's socket write gives up after its write
// timeout, and the rest is then answered at once.
func (s *redisSub) enter(msg []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		s.backlog = append(s.backlog, msg)
		return false
	}
	s.running = true
	return true
}

// next returns the next waiting message, or releases the handler.
func (s *redisSub) next() ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.backlog) == 0 {
		s.running = false
		s.backlog = nil
		return nil, false
	}
	msg := s.backlog[0]
	s.backlog[0] = nil
	s.backlog = s.backlog[1:]
	return msg, true
}

// Unsubscribe implements Subscription. It stops delivery at once and then
// waits, within ctx, until Redis confirmed the end of the subscription (so
// that later Publish counts no longer include it); the error reports a ctx
// that ended first. It may be called from within the handler.
func (s *redisSub) Unsubscribe(ctx context.Context) error {
	if !s.done.CompareAndSwap(false, true) {
		return nil
	}
	r := s.r
	r.sendUnsubscribe(s.e)
	for {
		r.mu.Lock()
		gone, closed, changed := s.e.deleted, r.closed, r.changed
		r.mu.Unlock()
		if gone || closed {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("unsubscribing from redis channel %q: %w", s.name, ctx.Err())
		case <-r.done:
			return nil
		}
	}
}

// sendSubscribe sends SUBSCRIBE for e on its connection's current
// generation, unless that generation was already asked or the connection
// is down (its next generation will ask).
func (r *Redis) sendSubscribe(e *entry) {
	for {
		r.mu.Lock()
		c := e.conn
		r.mu.Unlock()
		c.sendMu.Lock()
		r.mu.Lock()
		if e.conn != c { // moved to another node meanwhile
			r.mu.Unlock()
			c.sendMu.Unlock()
			continue
		}
		ps := c.ps
		send := ps != nil && !e.deleted && e.sub != nil && e.gen != c.gen
		if send {
			e.gen = c.gen
			e.pending++
		}
		r.mu.Unlock()
		if send {
			_ = c.subscribeCmd(context.Background(), ps, e.channel)
		}
		c.sendMu.Unlock()
		return
	}
}

// sendUnsubscribe ends e: if its SUBSCRIBE went out on the current
// generation it sends UNSUBSCRIBE and leaves e for receive to remove on
// confirmation; otherwise it removes e at once.
func (r *Redis) sendUnsubscribe(e *entry) {
	for {
		r.mu.Lock()
		c := e.conn
		r.mu.Unlock()
		c.sendMu.Lock()
		r.mu.Lock()
		if e.conn != c {
			r.mu.Unlock()
			c.sendMu.Unlock()
			continue
		}
		if e.deleted {
			r.mu.Unlock()
			c.sendMu.Unlock()
			return
		}
		e.ending, e.sub = e.sub, nil
		ps := c.ps
		if ps != nil && e.gen == c.gen {
			e.pending++
		} else {
			ps = nil
			c.removeLocked(e)
		}
		r.mu.Unlock()
		if ps != nil {
			_ = c.unsubscribeCmd(context.Background(), ps, e.channel)
		}
		c.sendMu.Unlock()
		return
	}
}
