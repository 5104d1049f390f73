package broker

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/async"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

// A connection as package async drains its workspace's queue through it
// (async.Holder) and as package api cancels a call through it
// (api.Holder).

var _ async.Holder = (*conn)(nil)

// CancelCall implements async.Holder and api.Holder: it ends the call
// cid, if it is in the table, with cancelled.
func (c *conn) CancelCall(cid, reason string) bool { return c.calls.cancel(cid, reason) }

// Deliver implements async.Holder.
func (c *conn) Deliver(call protocol.ToolCall, w caller.Waiter, claimed bool) {
	c.deliver(call, w, claimed, nil)
}

// Adopt implements async.Holder.
func (c *conn) Adopt(cid string) bool { return c.calls.adopt(cid) }

// Pending implements async.Holder.
func (c *conn) Pending(cid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.calls.byID[cid]
	return ok
}

// Serving implements async.Holder.
func (c *conn) Serving() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && !c.replaced && !c.b.isDraining()
}

// Context implements async.Holder: the session's, which ends with it.
func (c *conn) Context() context.Context { return c.s.Context() }

// Log implements async.Holder.
func (c *conn) Log(e *zerolog.Event) *zerolog.Event { return c.event(e) }
