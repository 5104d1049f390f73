package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/protocol"
)

// Holding a workspace: a connection subscribes to the workspace channel,
// takes the workspace over from any older holder on the bus (joining, see
// Broker.hold), and yields when a newer connection takes it.

// hold makes c the holder of workspace ws: c subscribes to the workspace
// channel, then tells older holders anywhere on the bus to yield, then the
// client learns it is connected, then waiting calls learn it is online.
//
// Every subscriber sees the channel's messages in one order, so the takeover
// splits the calls exactly: those published before it are the older
// holder's (it sees them before it yields), those after it are c's (the
// older holder ignores them once replaced). c keeps the calls that reach it
// before its own takeover comes back (joining) and delivers them only if no
// other holder was subscribed when the takeover went out. So no call
// reaches two clients, and none falls between the two holders.
//
// That order holds while every holder stays subscribed. A broker whose bus
// connection was lost misses what was published meanwhile, takeovers
// included, so each of its holders takes its workspace again once the bus
// is back, and waits for the other holders' answers before it delivers
// (BusLost, Reannounce).
func (b *Broker) hold(c *conn, ws string) error {
	c.mu.Lock()
	c.workspace.Store(&ws)
	c.since = time.Now().UnixNano()
	c.takenAt = c.since
	c.mu.Unlock()
	b.mu.Lock()
	b.holders[ws] = c
	b.mu.Unlock()
	b.metrics.workspaces.Inc()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.joining.Store(true)
	sub, err := b.bus.Subscribe(ctx, protocol.WorkspaceChannel(ws), c.onBusMessage)
	if err != nil {
		return fmt.Errorf("subscribing workspace channel: %w", err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = sub.Unsubscribe(ctx)
		return errors.New("connection closed while registering")
	}
	c.sub = sub
	c.mu.Unlock()
	n, taken, err := b.publishTakeover(ctx, c)
	if err != nil {
		return err
	}
	// n counts c itself; more means another holder had the earlier calls.
	c.joinSettle(taken, n)
	if !c.connected() {
		return errors.New("connection closed while registering")
	}
	c.event(b.log.Info()).Msg("workspace connected")
	if _, err := b.bus.Publish(ctx, protocol.OnlineChannel, []byte(ws)); err != nil {
		c.event(b.log.Warn()).Err(err).Msg("announcing workspace online failed")
	}
	c.queue.Kick() // async calls that waited for the workspace
	return nil
}

// reachable says whether calls published to c's workspace reach c: it
// has subscribed to the workspace's channel and is not closed or replaced.
func (c *conn) reachable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sub != nil && !c.closed && !c.replaced
}

// publishTakeover announces c as the workspace's holder since its takenAt
// and returns how many subscribers of the workspace channel (c included)
// received it, and that takenAt.
func (b *Broker) publishTakeover(ctx context.Context, c *conn) (int, int64, error) {
	c.mu.Lock()
	taken := c.takenAt
	c.mu.Unlock()
	msg, _ := json.Marshal(protocol.BusMessage{Type: protocol.BusTakeover, Holder: c.s.ID(), Since: taken})
	n, err := b.bus.Publish(ctx, protocol.WorkspaceChannel(c.WorkspaceID()), msg)
	if err != nil {
		return 0, taken, fmt.Errorf("announcing takeover: %w", err)
	}
	return n, taken, nil
}

// announce repeats c's takeover, for when an older connection claimed the
// workspace after c did.
func (b *Broker) announce(c *conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := b.publishTakeover(ctx, c); err != nil {
		c.event(b.log.Warn()).Err(err).Msg("reasserting takeover failed")
	}
}

// BusLost makes every connection holding a workspace here take it again:
// from now it keeps the calls that reach it instead of delivering them,
// until Reannounce has published its takeover again and the holders that
// heard it have answered. Call it when a bus pub/sub connection was lost,
// before it subscribes again (bus.RedisConfig.OnLost): meanwhile this
// broker's holders missed what was published, and a newer connection
// elsewhere may have taken their workspace without their hearing of it.
//
// The takeover splits the calls as when a connection joins (hold): those
// before it are another holder's, if one heard it. After it, the newest
// holder wins as always: a newer one reasserts its own takeover and c
// yields; an older one yields to c and says so (a yield message). So c
// delivers the calls after its takeover once every other holder that heard
// it has yielded, and none if it yields itself; a holder that hears
// neither within rejoinWait is disconnected (its client connects again)
// and its calls left to whoever answers them.
func (b *Broker) BusLost() {
	conns := b.holderConns()
	for _, c := range conns {
		c.rejoin()
	}
}

// rejoinWait bounds how long a holder that took its workspace again waits
// for the other holders that heard it to yield or reassert.
const rejoinWait = 3 * time.Second

// rejoin puts c back to joining. Calls it kept while an earlier join was
// in progress are dropped: which holder they belong to was decided by
// messages that may be lost (they answer timeout rather than risk reaching
// two clients).
func (c *conn) rejoin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.replaced || c.WorkspaceID() == "" {
		return
	}
	c.takenAt++ // its own order among holders, its own echo
	c.echoed, c.settled, c.heard = false, false, 0
	c.early, c.later, c.yields = nil, nil, 0
	c.stopYieldWaitLocked()
	c.rejoining = true
	c.joining.Store(true)
}

// Reannounce repeats the takeover and the online announcement of every
// workspace this broker holds. Call it when the bus has resubscribed after
// losing Redis (bus.RedisConfig.OnReconnect), after BusLost: what was
// published meanwhile is lost, so each holder takes its workspace again
// (BusLost says how its calls are split), callers waiting for a workspace
// learn that it is served, and each holder drains its queue of async
// calls. A holder whose takeover cannot be published is disconnected, so
// that its client connects again.
func (b *Broker) Reannounce() {
	conns := b.holderConns()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range conns {
		n, taken, err := b.publishTakeover(ctx, c)
		if err != nil {
			// It would keep its calls for ever: its client connects
			// again and takes the workspace afresh.
			c.event(b.log.Warn()).Err(err).Msg("reannouncing workspace failed; disconnecting it")
			c.close(ReasonBusLost, true)
			continue
		}
		c.joinSettle(taken, n)
		if _, err := b.bus.Publish(ctx, protocol.OnlineChannel, []byte(c.WorkspaceID())); err != nil {
			c.event(b.log.Warn()).Err(err).Msg("reannouncing workspace online failed")
		}
		c.queue.Kick() // drain messages published meanwhile were lost
	}
	b.log.Info().Int("workspaces", len(conns)).Msg("bus reconnected; workspaces reannounced")
}

// release forgets c as a holder (if it still is one).
func (b *Broker) release(c *conn) {
	b.mu.Lock()
	if ws := c.WorkspaceID(); b.holders[ws] == c {
		delete(b.holders, ws)
	}
	b.mu.Unlock()
	b.metrics.workspaces.Dec()
}

func (c *conn) takeover(m protocol.BusMessage) {
	taken := c.takenNow()
	if m.Holder == c.s.ID() {
		if c.joining.Load() && m.Since == taken {
			c.joinStep(taken, func() { c.echoed = true })
		}
		return
	}
	newer := m.Since > taken || (m.Since == taken && m.Holder > c.s.ID())
	if !newer {
		// An older connection announced itself after we did: say again
		// that we hold the workspace, so it yields.
		c.event(c.b.log.Info()).Str("other", m.Holder).Msg("older connection claimed the workspace; reasserting")
		c.b.spawn(func() { c.b.announce(c) })
		return
	}
	c.mu.Lock()
	c.replaced = true
	taken = c.takenAt
	c.mu.Unlock()
	c.event(c.b.log.Info()).Str("by", m.Holder).Msg("workspace taken over by a newer connection")
	c.audit(audit.Event{Event: audit.Replace, Reason: "taken over by session " + m.Holder})
	// A holder taking the workspace again after losing the bus waits for
	// this (BusLost); the calls after the takeover are already ignored.
	msg, _ := json.Marshal(protocol.BusMessage{Type: protocol.BusYield, Holder: c.s.ID(), Since: taken, Reason: m.Holder})
	ws := c.WorkspaceID()
	c.b.spawn(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.b.bus.Publish(ctx, protocol.WorkspaceChannel(ws), msg); err != nil {
			c.event(c.b.log.Debug()).Err(err).Msg("announcing the yield failed")
		}
	})
	c.close(ReasonReplaced, true)
}

// yielded counts another holder's yield to c while c takes its workspace
// again (BusLost): once every other holder that heard the takeover has
// yielded, the calls after it are c's.
func (c *conn) yielded(m protocol.BusMessage) {
	if m.Reason != c.s.ID() || !c.joining.Load() {
		return
	}
	c.joinStep(c.takenNow(), func() {
		if c.rejoining {
			c.yields++
		}
	})
}

func (c *conn) takenNow() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takenAt
}

// keepEarly keeps a call that arrived while c is joining and before its own
// takeover came back; false when the caller should deliver it: c finished
// joining, or the call came after the takeover (the older holder ignores
// those, so they are c's whatever hold learns).
func (c *conn) keepEarly(call protocol.ToolCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.joining.Load() || c.closed:
		return false
	case !c.echoed:
		c.early = append(c.early, call)
	case c.rejoining: // c's only once the other holders yielded
		c.later = append(c.later, call)
	default:
		return false
	}
	return true
}

// joinSettle tells a joining connection how many subscribers its takeover
// of taken reached, c included. A join can be settled twice (hold's own
// takeover and Reannounce's, of the same takenAt): the larger count holds.
func (c *conn) joinSettle(taken int64, n int) {
	c.joinStep(taken, func() { c.settled, c.heard = true, max(c.heard, n) })
}

// joinStep records one of the facts that end the join of taken (set runs
// under mu; a step of an earlier takeover is ignored): the own takeover's
// echo, the count it reached and, while rejoining, the others' yields.
// Once the echo and the count are in, the calls that came early are
// delivered, unless another holder had them too: it saw them before the
// takeover and serves them. While rejoining, the join ends only when
// every other holder that heard the takeover has yielded; the calls after
// the echo are delivered then.
func (c *conn) joinStep(taken int64, set func()) {
	c.mu.Lock()
	if !c.joining.Load() || c.closed || c.takenAt != taken {
		c.mu.Unlock()
		return
	}
	set()
	if !c.echoed || !c.settled {
		c.mu.Unlock()
		return
	}
	shared := c.heard > 1
	if c.rejoining {
		if shared {
			c.early = nil // the other holder's
		}
		if c.yields < c.heard-1 {
			if c.yieldWait == nil {
				c.yieldWait = time.AfterFunc(rejoinWait, func() { c.yieldsLate(taken) })
			}
			c.mu.Unlock()
			return
		}
	}
	c.joining.Store(false)
	c.rejoining = false
	c.stopYieldWaitLocked()
	calls, left := c.later, 0
	if shared {
		left = len(c.early)
	} else {
		calls = append(c.early, c.later...)
	}
	c.early, c.later = nil, nil
	c.mu.Unlock()
	c.event(c.b.log.Debug()).Msg("workspace joined: calls from this broker's API now go to it directly")
	if left > 0 {
		c.event(c.b.log.Debug()).Int("calls", left).Msg("calls published before the takeover left to the previous holder")
	}
	for _, call := range calls {
		c.deliver(call, nil, false, nil)
	}
}

// yieldsLate runs rejoinWait after c's rejoin of taken began to wait for
// the other holders: if it still waits, c is disconnected.
func (c *conn) yieldsLate(taken int64) {
	c.mu.Lock()
	stuck := c.joining.Load() && c.rejoining && !c.closed && c.takenAt == taken
	c.mu.Unlock()
	if stuck {
		c.event(c.b.log.Warn()).Msg("another holder of the workspace neither yielded nor reasserted after the bus came back; disconnecting")
		c.close(ReasonBusLost, true)
	}
}

// stopYieldWaitLocked stops the bound on a rejoin's wait for yields: the
// join ended, began anew, or c closed. Called with mu held.
func (c *conn) stopYieldWaitLocked() {
	if c.yieldWait != nil {
		c.yieldWait.Stop()
		c.yieldWait = nil
	}
}
