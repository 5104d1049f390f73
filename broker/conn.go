package broker

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/async"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/eio"
	"github.com/tetherdev/tether/protocol"
)

// A client connection as the routing core sees it: the Engine.IO session
// it rides on (package eio: transport, heartbeat, write queue), and what
// makes it a workspace's holder. Each job of a connection has a file named
// for it: handshake.go (CONNECT), packets.go (the client's Socket.IO
// packets), takeover.go (holding the workspace), deliver.go (calls from
// the bus to the socket), calls.go (the pending-call table); its drain of
// the workspace's queue of async calls is package async's (conn.queue),
// which it serves as an async.Holder (holder.go).

// Disconnect reasons of the routing core, sent to the client in a
// disconnect_reason event before the Socket.IO DISCONNECT and used in
// logs; package eio has those of the transport (eio.ReasonShutdown, ...).
const (
	ReasonReplaced = "replaced"
	ReasonBusLost  = "bus connection lost"
	ReasonRevoked  = auth.RevokedMessage
)

// EventDisconnectReason tells a client why the broker is about to disconnect
// it; Socket.IO's DISCONNECT packet carries no reason of its own.
const EventDisconnectReason = "disconnect_reason"

// conn is one client connection: an eio.Handler. All state below mu is
// guarded by it; no I/O happens under it. Lock order: mu, then the
// session's.
type conn struct {
	b *Broker
	s *eio.Session
	// since is when CONNECT succeeded, unix ns.
	since int64
	// workspace is set once, when CONNECT succeeds; read it with
	// WorkspaceID from any goroutine (timers and log lines read it too).
	workspace atomic.Pointer[string]
	// joining is set from subscribing to the workspace channel until the
	// connection's own takeover has come back on it and hold knows whether
	// another holder was subscribed (see Broker.hold).
	joining atomic.Bool
	// principal is who the CONNECT's token names, for the audit log
	// (audit.go); nil when it is off or before CONNECT.
	principal atomic.Pointer[audit.Principal]

	// queue drains the workspace's queue of async calls (package async,
	// its own lock; set once, in newConn).
	queue *async.Queue

	mu sync.Mutex
	// The connection's life.
	closed   bool
	replaced bool // a newer holder took the workspace: stay silent on calls
	sub      bus.Subscription
	// untrack forgets the connection's token in the revocation list
	// (handshake.go); nil before CONNECT.
	untrack func()
	// The calls delivered to the client and not answered (calls.go).
	calls callTable

	// Taking the workspace over (takeover.go). takenAt orders takeovers
	// (the newest holder wins): when CONNECT succeeded, unix ns, plus one
	// for each time c took its workspace again after the bus was lost
	// (rejoin), so that c's own takeover coming back on the channel is
	// told from an earlier one of its own.
	takenAt int64
	// While joining (see Broker.hold).
	echoed  bool                // own takeover (of takenAt) seen on the channel
	settled bool                // hold knows heard
	heard   int                 // subscribers the takeover reached, c included: more means another holder heard it
	early   []protocol.ToolCall // calls that arrived while joining, before the echo
	// While taking the workspace again after the bus was lost (rejoin):
	// the calls after the echo wait until every other holder that heard
	// the takeover has yielded (yields counts them).
	rejoining bool
	later     []protocol.ToolCall
	yields    int         // yields to c heard
	yieldWait *time.Timer // bounds the wait for them (rejoinWait); nil when none runs
}

// newConn is the routing core's side of a new session; nil when the broker
// is shutting down (eio refuses the session then).
func (b *Broker) newConn(s *eio.Session) eio.Handler {
	c := &conn{b: b, s: s}
	c.calls = newCallTable(&c.mu, c, &b.log, b.metrics.inFlight, b.metrics.duplicates)
	c.queue = b.asyncOwner.Queue(c)
	s.Bind(c) // before track: Shutdown may close c as soon as it is tracked
	if !b.track(c) {
		return nil
	}
	return c
}

// event adds the connection's fields to a log event (nil when the level is
// off: then nothing is computed).
func (c *conn) event(e *zerolog.Event) *zerolog.Event {
	if e == nil {
		return nil
	}
	e = c.s.Log(e)
	if ws := c.WorkspaceID(); ws != "" {
		e = e.Str("workspace_id", ws)
	}
	return e
}

// WorkspaceID is the workspace the connection serves ("" before CONNECT);
// it implements async.Holder and api.Holder.
func (c *conn) WorkspaceID() string {
	if ws := c.workspace.Load(); ws != nil {
		return *ws
	}
	return ""
}

// callEvent adds a call's fields too.
func (c *conn) callEvent(e *zerolog.Event, call *protocol.ToolCall) *zerolog.Event {
	return c.event(e).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint)
}

// send queues a frame for the client; false when it was not queued.
func (c *conn) send(frame []byte) bool { return c.s.Send(frame) == nil }

// close ends the connection: its session closes, and Ended does the
// rest.
func (c *conn) close(reason string, notify bool) { c.s.Close(reason, notify) }

// Ended implements eio.Handler: the session ends, once. The workspace is
// released, every pending call is answered workspace_disconnected, and
// when notify is set a connected client is told why (a disconnect_reason
// event, then DISCONNECT).
func (c *conn) Ended(reason string, notify bool) [][]byte {
	c.mu.Lock()
	c.closed = true
	wasConnected := c.WorkspaceID() != ""
	c.stopYieldWaitLocked()
	pend := c.calls.takeAllLocked()
	sub := c.sub
	c.sub = nil
	untrack := c.untrack
	c.untrack = nil
	// Calls kept while joining reached c alone unless another holder was
	// subscribed (or that is not known yet): then they are not c's to answer.
	early := c.early
	c.early, c.later = nil, nil // later: never c's alone while it rejoins
	if !c.settled || c.heard > 1 || c.rejoining {
		early = nil
	}
	c.joining.Store(false)
	c.mu.Unlock()
	if untrack != nil {
		untrack()
	}
	gone := "workspace client disconnected: " + reason
	for _, call := range early {
		c.calls.finish(&pending{call: call}, endDisconnected, protocol.Failure(call.CorrelationID, protocol.CodeWorkspaceDisconnected, gone), reason)
	}

	if sub != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := sub.Unsubscribe(ctx); err != nil {
			c.event(c.b.log.Warn()).Err(err).Msg("unsubscribing workspace failed")
		}
		cancel()
	}
	if wasConnected {
		c.b.release(c)
	}
	c.calls.finishAll(pend, endDisconnected, protocol.CodeWorkspaceDisconnected, gone, reason)
	c.event(c.b.log.Info()).Str("reason", reason).Int("pending_answered", len(pend)).Msg("connection closed")
	if wasConnected {
		c.audit(audit.Event{Event: audit.Disconnect, Reason: reason, DurationMS: c.connectedFor()})
	}
	c.b.untrack(c)
	if !notify || !wasConnected {
		return nil
	}
	body, _ := json.Marshal(map[string]string{"reason": reason})
	return [][]byte{
		protocol.EncodeEvent(protocol.NoAck, EventDisconnectReason, body),
		protocol.AppendMessage(nil, protocol.SIOPacket{Type: protocol.SIODisconnect, ID: protocol.NoAck}),
	}
}
