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
func (b *Broker) hold(c *conn, ws string) error {
	c.mu.Lock()
	c.workspace.Store(&ws)
	c.since = time.Now().UnixNano()
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
	n, err := b.publishTakeover(ctx, c)
	if err != nil {
		return err
	}
	// n counts c itself; more means another holder had the earlier calls.
	c.joinSettle(n > 1)
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

// publishTakeover announces c as the workspace's holder and returns how many
// subscribers of the workspace channel (c included) received it.
func (b *Broker) publishTakeover(ctx context.Context, c *conn) (int, error) {
	msg, _ := json.Marshal(protocol.BusMessage{Type: protocol.BusTakeover, Holder: c.id, Since: c.since})
	n, err := b.bus.Publish(ctx, protocol.WorkspaceChannel(c.workspaceID()), msg)
	if err != nil {
		return 0, fmt.Errorf("announcing takeover: %w", err)
	}
	return n, nil
}

// announce repeats c's takeover, for when an older connection claimed the
// workspace after c did.
func (b *Broker) announce(c *conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.publishTakeover(ctx, c); err != nil {
		c.event(b.log.Warn()).Err(err).Msg("reasserting takeover failed")
	}
}

// Reannounce repeats the takeover and the online announcement of every
// workspace this broker holds. Call it when the bus has resubscribed after
// losing Redis (bus.RedisConfig.OnReconnect): what was published meanwhile
// is lost, so a connection elsewhere that took a workspace during the outage
// hears of this one (the older yields), callers waiting for a workspace learn
// that it is served, and each holder drains its queue of async calls.
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
		if _, err := b.publishTakeover(ctx, c); err != nil {
			c.event(b.log.Warn()).Err(err).Msg("reannouncing workspace failed")
			continue
		}
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
	if m.Holder == c.id {
		if c.joining.Load() {
			c.joinStep(func() { c.echoed = true })
		}
		return
	}
	newer := m.Since > c.since || (m.Since == c.since && m.Holder > c.id)
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
// subscribed when its takeover went out.
func (c *conn) joinSettle(shared bool) {
	c.joinStep(func() { c.settled, c.shared = true, shared })
}

// joinStep records one of the two facts that end joining (set runs under
// mu); once both are in, the calls that came early are delivered, unless
// another holder had them too: it saw them before the takeover and serves
// them.
func (c *conn) joinStep(set func()) {
	c.mu.Lock()
	if !c.joining.Load() || c.closed {
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
