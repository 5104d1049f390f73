package bus

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/internal/handoff"
)

// Reading a pub/sub connection: messages to their handlers, one at a time
// and in order per subscription, and the replies that confirm its
// subscriptions.

// receive reads the current generation until it fails. Handlers run on the
// reading goroutine, so a message costs no handoff; a handler that runs
// longer than handoff.DefaultAfter (it blocks, or it waits for the bus, as an
// Unsubscribe from within a handler does until Redis confirms) has a new
// goroutine take over the reading, and its own goroutine ends with it.
// Messages for a subscription whose handler still runs wait for it, so each
// subscription sees its messages one at a time and in order.
func (c *psConn) receive(ps *redis.PubSub) error {
	errc := make(chan error, 1)
	var loop *handoff.Loop
	read := func() {
		for {
			msg, err := ps.Receive(c.ctx)
			if err != nil {
				errc <- err
				return
			}
			switch m := msg.(type) {
			case *redis.Message:
				s := c.onMessage(m)
				if s == nil {
					continue
				}
				msg := []byte(m.Payload)
				if !s.enter(msg) {
					continue // after the handler call that runs
				}
				if !loop.Do(func() { c.serve(s, msg) }) {
					return // another goroutine reads now
				}
			case *redis.Subscription:
				if err := c.onConfirm(m); err != nil {
					errc <- err
					return
				}
			case *redis.Pong:
				if m.Payload == liveMarker {
					c.onLive()
				}
			}
		}
	}
	loop = handoff.New(handoff.DefaultAfter, func() {
		c.r.wg.Add(1)
		go func() {
			defer c.r.wg.Done()
			read()
		}()
	})
	read()
	return <-errc
}

// onMessage returns the subscription a message is for, or nil (a self-ping,
// a channel no longer carried).
func (c *psConn) onMessage(m *redis.Message) *redisSub {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Channel == c.pingChannel {
		c.pingSince = time.Time{}
		return nil
	}
	if e := c.entries[m.Channel]; e != nil {
		if e.sub != nil {
			return e.sub
		}
		if e.everConfirmed { // not for a Subscribe that failed
			return e.ending // Redis counted this message for it
		}
	}
	return nil
}

// onConfirm accounts a (s)subscribe or (s)unsubscribe reply. An error means
// the connection's state is no longer known and it must be replaced.
func (c *psConn) onConfirm(m *redis.Subscription) error {
	var subscribed bool
	switch m.Kind {
	case "subscribe", "ssubscribe":
		subscribed = true
	case "unsubscribe", "sunsubscribe":
	default:
		return nil
	}
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Channel == c.pingChannel {
		if !subscribed {
			return fmt.Errorf("redis ended the ping subscription %q", m.Channel)
		}
		return nil
	}
	e := c.entries[m.Channel]
	if e == nil {
		return nil
	}
	if e.pending == 0 {
		if !subscribed && e.subscribed {
			// Redis dropped the channel by itself: on a cluster, its slot
			// moved to another node.
			return fmt.Errorf("redis ended the subscription of %q", m.Channel)
		}
		return nil
	}
	e.pending--
	if e.pending > 0 {
		return nil
	}
	switch {
	case e.sub == nil && !subscribed:
		c.removeLocked(e)
	case e.sub != nil && subscribed:
		e.subscribed, e.everConfirmed = true, true
		r.broadcastLocked()
	default:
		return fmt.Errorf("redis subscription state of %q disagrees with the bus", m.Channel)
	}
	return nil
}

func (c *psConn) onLive() {
	r := c.r
	r.mu.Lock()
	c.live = true
	c.pingSince = time.Time{}
	reconnected := c.everLive
	c.everLive = true
	n := len(c.entries)
	down := time.Since(c.downSince)
	r.broadcastLocked()
	r.mu.Unlock()
	if reconnected {
		r.log.Info().Stringer("conn", c.key).Int("channels", n).
			Dur("down", down.Round(time.Millisecond)).Msg("redis pub/sub resubscribed")
		if r.onReconnect != nil {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.onReconnect()
			}()
		}
	}
}

// serve calls s's handler for msg and then for the messages that queued
// behind it, in order.
func (c *psConn) serve(s *redisSub, msg []byte) {
	for ok := true; ok; msg, ok = s.next() {
		c.call(s, msg)
	}
}

func (c *psConn) call(s *redisSub, msg []byte) {
	if c.r.isClosed.Load() {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			c.r.log.Error().Str("channel", s.name).Interface("panic", p).
				Msg("bus handler panicked")
		}
	}()
	s.h(msg)
}
