package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
// is back, as if it had just connected (BusLost, Reannounce).
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
	c.joinSettle(taken, n > 1)
	if !c.connected(ws) {
		return errors.New("connection closed while registering")
	}
	c.event(b.log.Info()).Msg("workspace connected")
	if _, err := b.bus.Publish(ctx, protocol.OnlineChannel, []byte(ws)); err != nil {
		c.event(b.log.Warn()).Err(err).Msg("announcing workspace online failed")
	}
	c.kickQueue() // async calls that waited for the workspace
	return nil
}

// publishTakeover announces c as the workspace's holder since its takenAt
// and returns how many subscribers of the workspace channel (c included)
// received it, and that takenAt.
func (b *Broker) publishTakeover(ctx context.Context, c *conn) (int, int64, error) {
	c.mu.Lock()
	taken := c.takenAt
	c.mu.Unlock()
	msg, _ := json.Marshal(protocol.BusMessage{Type: protocol.BusTakeover, Holder: c.id, Since: taken})
	n, err := b.bus.Publish(ctx, protocol.WorkspaceChannel(c.workspaceID()), msg)
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

// BusLost makes every connection holding a workspace here take it again,
// from now: it keeps the calls that reach it from now on instead of
// delivering them, until Reannounce has published its new takeover and
// learnt whether another holder was subscribed. Call it when a bus
// pub/sub connection was lost, before it subscribes again
// (bus.RedisConfig.OnLost): meanwhile this broker's holders missed what was
// published, and a connection elsewhere may have taken their workspace
// without their hearing of it. Whoever takes a workspace last then holds
// it (the other yields on hearing the newer takeover), and the takeover
// splits its calls between them as when a connection joins (hold).
func (b *Broker) BusLost() {
	b.mu.Lock()
	conns := make([]*conn, 0, len(b.holders))
	for _, c := range b.holders {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.rejoin()
	}
}

// rejoin puts c back to joining with a new takenAt. Calls it kept while
// an earlier join was in progress are dropped: which holder they belong to
// was decided by messages that may be lost (they answer timeout rather
// than risk reaching two clients).
func (c *conn) rejoin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.replaced || c.workspaceID() == "" {
		return
	}
	c.takenAt = max(time.Now().UnixNano(), c.takenAt+1)
	c.echoed, c.settled, c.shared, c.early = false, false, false, nil
	c.joining.Store(true)
}

// Reannounce repeats the takeover and the online announcement of every
// workspace this broker holds. Call it when the bus has resubscribed after
// losing Redis (bus.RedisConfig.OnReconnect), after BusLost: what was
// published meanwhile is lost, so each holder takes its workspace again
// (a connection elsewhere that took it during the outage hears of the newer
// takeover and yields), settles that join by whether another holder heard
// it, callers waiting for a workspace learn that it is served, and each
// holder drains its queue of async calls. A holder whose takeover cannot be
// published is disconnected, so that its client connects again.
func (b *Broker) Reannounce() {
	b.mu.Lock()
	conns := make([]*conn, 0, len(b.holders))
	for _, c := range b.holders {
		conns = append(conns, c)
	}
	b.mu.Unlock()
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
		c.joinSettle(taken, n > 1) // when BusLost made it join again
		if _, err := b.bus.Publish(ctx, protocol.OnlineChannel, []byte(c.workspaceID())); err != nil {
			c.event(b.log.Warn()).Err(err).Msg("reannouncing workspace online failed")
		}
		c.kickQueue() // drain messages published meanwhile were lost
	}
	b.log.Info().Int("workspaces", len(conns)).Msg("bus reconnected; workspaces reannounced")
}

// release forgets c as a holder (if it still is one).
func (b *Broker) release(c *conn) {
	b.mu.Lock()
	if ws := c.workspaceID(); b.holders[ws] == c {
		delete(b.holders, ws)
	}
	b.mu.Unlock()
	b.metrics.workspaces.Dec()
}

func (c *conn) takeover(m protocol.BusMessage) {
	c.mu.Lock()
	taken := c.takenAt
	c.mu.Unlock()
	if m.Holder == c.id {
		if c.joining.Load() && m.Since == taken {
			c.joinStep(taken, func() { c.echoed = true })
		}
		return
	}
	newer := m.Since > taken || (m.Since == taken && m.Holder > c.id)
	if !newer {
		// An older connection announced itself after we did: say again
		// that we hold the workspace, so it yields.
		c.event(c.b.log.Info()).Str("other", m.Holder).Msg("older connection claimed the workspace; reasserting")
		c.b.wg.Go(func() { c.b.announce(c) })
		return
	}
	c.mu.Lock()
	c.replaced = true
	c.mu.Unlock()
	c.event(c.b.log.Info()).Str("by", m.Holder).Msg("workspace taken over by a newer connection")
	c.close(ReasonReplaced, true)
}

// keepEarly keeps a call that arrived while c is joining and before its own
// takeover came back; false when the caller should deliver it: c finished
// joining, or the call came after the takeover (the older holder ignores
// those, so they are c's whatever hold learns).
func (c *conn) keepEarly(call protocol.ToolCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.joining.Load() || c.closed || c.echoed {
		return false
	}
	c.early = append(c.early, call)
	return true
}

// joinSettle tells a joining connection whether another holder was
// subscribed when its takeover of taken went out. A join can be settled
// twice (hold's own takeover and Reannounce's, of the same takenAt): a
// holder that either one found makes it shared.
func (c *conn) joinSettle(taken int64, shared bool) {
	c.joinStep(taken, func() { c.settled, c.shared = true, c.shared || shared })
}

// joinStep records one of the two facts that end the join of taken (set
// runs under mu; a step of an earlier takeover is ignored); once both are
// in, the calls that came early are delivered, unless another holder had
// them too: it saw them before the takeover and serves them.
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
	c.joining.Store(false)
	early, shared := c.early, c.shared
	c.early = nil
	c.mu.Unlock()
	if shared {
		if len(early) > 0 {
			c.event(c.b.log.Debug()).Int("calls", len(early)).Msg("calls published before the takeover left to the previous holder")
		}
		return
	}
	for _, call := range early {
		c.deliver(call, nil, false)
	}
}
