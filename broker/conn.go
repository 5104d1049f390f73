package broker

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/protocol"
)

// A client connection: its state, its life (serve) and its end (close). Each
// other job of a connection has a file named for it: accept.go,
// handshake.go, conn_read.go, conn_write.go, heartbeat.go, takeover.go,
// deliver.go, calls.go and async.go.

// Disconnect reasons, sent to the client in a disconnect_reason event before
// the Socket.IO DISCONNECT and used in logs.
const (
	ReasonReplaced     = "replaced"
	ReasonShutdown     = "server shutting down"
	ReasonPingTimeout  = "ping timeout"
	ReasonMalformed    = "malformed packet"
	ReasonClientClosed = "client disconnect"
	ReasonTransport    = "transport error"
)

// EventDisconnectReason tells a client why the broker is about to disconnect
// it; Socket.IO's DISCONNECT packet carries no reason of its own.
const EventDisconnectReason = "disconnect_reason"

// conn is one WebSocket client. The HTTP handler goroutine runs its read
// loop; frames go out through a queue written by a goroutine that exists
// only while there is something to write (writeQueued), so an idle
// connection costs one goroutine. All state below mu is guarded by it; no I/O happens under it.
type conn struct {
	b      *Broker
	tr     transport
	id     string // Engine.IO sid, also the holder id in takeovers
	remote string
	bearer string // token from the upgrade's Authorization header
	// hs is the connection's place among its address's handshakes in
	// progress (limit.go), given back at CONNECT or close.
	hs    *handshake
	since int64 // when CONNECT succeeded, unix ns: newest holder wins
	// workspace is set once, when CONNECT succeeds; read it with
	// workspaceID from any goroutine (timers and log lines read it too).
	workspace atomic.Pointer[string]
	// joining is set from subscribing to the workspace channel until the
	// connection's own takeover has come back on it and hold knows whether
	// another holder was subscribed (see Broker.hold).
	joining atomic.Bool

	ctx    context.Context // ends the read loop
	cancel context.CancelFunc

	mu            sync.Mutex
	hbTimer       *time.Timer
	awaitingPong  bool
	queue         [][]byte
	spare         [][]byte
	writing       bool
	connectAckDue bool // the writer waits: the CONNECT ack goes out first
	closed        bool
	replaced      bool // a newer holder took the workspace: stay silent on calls
	sub           bus.Subscription
	calls         callTable // guarded by mu too

	// Draining the workspace's queue of async calls (async.go).
	queueRunning bool              // a drain goroutine runs
	queueAgain   bool              // look at the queue again after this round
	claimCancels map[string]string // cancels that came during a claim, by correlation id; nil between claims

	// While joining (see Broker.hold).
	echoed  bool                // own takeover seen on the channel
	settled bool                // hold knows shared
	shared  bool                // another holder was subscribed when the takeover went out
	early   []protocol.ToolCall // calls that arrived while joining
}

// serve runs the connection on the calling goroutine: the open packet, the
// heartbeat and the connect deadline, then the read loop until the
// connection ends, then close.
func (c *conn) serve() {
	defer c.cancel()
	var upgrades []string
	if _, polling := c.tr.(*pollTransport); polling {
		upgrades = []string{"websocket"}
	}
	open := protocol.EncodeOpen(protocol.OpenInfo{
		SID:          c.id,
		Upgrades:     upgrades,
		PingInterval: int(c.b.cfg.PingInterval / time.Millisecond),
		PingTimeout:  int(c.b.cfg.PingTimeout / time.Millisecond),
		MaxPayload:   c.b.cfg.MaxPayload,
	})
	if err := c.writeNow(open); err != nil {
		c.close(ReasonTransport, false)
		return
	}
	c.startHeartbeat()
	defer c.connectDeadline().Stop()

	reason := c.readLoop()
	c.close(reason, reason != ReasonClientClosed && reason != ReasonTransport)
}

// event adds the connection's fields to a log event (nil when the level is
// off: then nothing is computed).
func (c *conn) event(e *zerolog.Event) *zerolog.Event {
	if e == nil {
		return nil
	}
	e = e.Str("sid", c.id).Str("remote", c.remote)
	if ws := c.workspaceID(); ws != "" {
		e = e.Str("workspace_id", ws)
	}
	return e
}

// workspaceID is the workspace the connection serves ("" before CONNECT).
func (c *conn) workspaceID() string {
	if ws := c.workspace.Load(); ws != nil {
		return *ws
	}
	return ""
}

// callEvent adds a call's fields too.
func (c *conn) callEvent(e *zerolog.Event, call *protocol.ToolCall) *zerolog.Event {
	return c.event(e).Str("correlation_id", call.CorrelationID).Str("endpoint", call.Endpoint)
}

// close ends the connection once: the workspace is released, every pending
// call is answered workspace_disconnected, and the socket is closed (after a
// disconnect_reason event and DISCONNECT when notify is set).
func (c *conn) close(reason string, notify bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.hs.release()
	wasConnected := c.workspaceID() != ""
	if c.hbTimer != nil {
		c.hbTimer.Stop()
	}
	pend := c.calls.takeAllLocked()
	sub := c.sub
	c.sub = nil
	c.queue = nil
	// Calls kept while joining reached c alone unless another holder was
	// subscribed (or that is not known yet): then they are not c's to answer.
	early := c.early
	c.early = nil
	if !c.settled || c.shared {
		early = nil
	}
	c.joining.Store(false)
	c.mu.Unlock()
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

	// Closing handshakes wait on the peer; do it off the caller's goroutine
	// (which may be a bus handler), owned by the broker's wait group.
	c.b.wg.Go(func() {
		if notify && wasConnected {
			body, _ := json.Marshal(map[string]string{"reason": reason})
			_ = c.writeNow(protocol.EncodeEvent(protocol.NoAck, EventDisconnectReason, body))
			_ = c.writeNow(protocol.AppendMessage(nil, protocol.SIOPacket{Type: protocol.SIODisconnect, ID: protocol.NoAck}))
		}
		status := websocket.StatusNormalClosure
		switch reason {
		case ReasonMalformed:
			status = websocket.StatusProtocolError
		case ReasonShutdown:
			status = websocket.StatusGoingAway
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() { // bounded by the timeout below
			_ = c.tr.close(status, reason)
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			_ = c.tr.closeNow()
			<-done
		}
		c.cancel()
	})
}
