package bus

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Liveness: the self-pings that prove each pub/sub connection delivers,
// replacing the ones that do not, and Ready, which reports them.

// Ready implements Checker: it fails while a pub/sub connection is down,
// resubscribing, or its self-ping is overdue.
func (r *Redis) Ready(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	now := time.Now()
	for _, c := range r.conns {
		if !c.live && c.holdsLocked() {
			return fmt.Errorf("redis pub/sub connection %s is down or resubscribing", c.key)
		}
		if !c.pingSince.IsZero() && now.Sub(c.pingSince) > r.pingTimeout {
			return fmt.Errorf("redis pub/sub connection %s: self-ping not delivered for %v",
				c.key, now.Sub(c.pingSince).Round(time.Millisecond))
		}
	}
	return nil
}

// pingLoop publishes the self-pings, replaces connections whose ping is
// overdue or reached nobody, and closes extra connections left idle.
func (r *Redis) pingLoop() {
	defer r.wg.Done()
	tick := time.NewTicker(r.pingInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-tick.C:
		}
		type ping struct {
			c       *psConn
			channel string
		}
		var pings []ping
		var dead, idle []*psConn
		now := time.Now()
		r.mu.Lock()
		for key, c := range r.conns {
			if c.retirable() && len(c.entries) == 0 && !c.emptySince.IsZero() &&
				now.Sub(c.emptySince) >= r.pingInterval {
				delete(r.conns, key)
				idle = append(idle, c)
				continue
			}
			if !c.live {
				// A generation that does not confirm its subscriptions
				// in time sits on a dead socket too.
				if c.ps != nil && now.Sub(c.genSince) > r.pingTimeout {
					dead = append(dead, c)
				}
				continue
			}
			switch {
			case c.pingSince.IsZero():
				c.pingSince = now
			case now.Sub(c.pingSince) > r.pingTimeout:
				dead = append(dead, c)
				continue
			}
			// Named as Publish names channels: the publisher adds the prefix.
			pings = append(pings, ping{c, strings.TrimPrefix(c.pingChannel, r.prefix)})
		}
		r.mu.Unlock()

		for _, c := range idle {
			r.log.Debug().Stringer("conn", c.key).Msg("closing idle redis pub/sub connection")
			c.shutdown()
		}
		for _, c := range dead {
			r.log.Warn().Stringer("conn", c.key).Dur("timeout", r.pingTimeout).
				Msg("redis pub/sub connection unresponsive; replacing it")
			c.kill()
		}
		for _, p := range pings {
			ctx, cancel := context.WithTimeout(context.Background(), r.pingTimeout)
			n, err := r.pub.publish(ctx, p.channel, []byte("ping"))
			cancel()
			if err == nil && n == 0 {
				// Redis no longer counts the connection as subscribed.
				r.log.Warn().Stringer("conn", p.c.key).
					Msg("redis pub/sub self-ping reached nobody; replacing the connection")
				p.c.kill()
			}
			// An error leaves the ping outstanding: it becomes overdue.
		}
	}
}
