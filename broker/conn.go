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
	ReasonBusLost      = "bus connection lost"
)

// EventDisconnectReason tells a client why the broker is about to disconnect
// it; Socket.IO's DISCONNECT packet carries no reason of its own.
const EventDisconnectReason = "disconnect_reason"

// conn is one client. A reader goroutine runs its read loop (conn_read.go)
// while the client talks; on a WebSocket that has been quiet for a while
// the reader ends and the socket's poller starts a new one when the client
// sends again (socket.go). Frames go out through a queue written by a
// goroutine that exists only while there is something to write
// (writeQueued). So an idle WebSocket connection has no goroutine. All
// state below mu is guarded by it; no I/O happens under it.
type conn struct {
	b      *Broker
	tr     transport
	id     string // Engine.IO sid, also the holder id in takeovers
	remote string
	bearer string // token from the upgrade's Authorization header
	// hs is the connection's place among its address's handshakes in
	// progress (limit.go), given back at CONNECT or close.
	hs    *handshake
	since int64 // when CONNECT succeeded, unix ns
	// workspace is set once, when CONNECT succeeds; read it with
	// workspaceID from any goroutine (timers and log lines read it too).
	workspace atomic.Pointer[string]
	// joining is set from subscribing to the workspace channel until the
	// connection's own takeover has come back on it and hold knows whether
	// another holder was subscribed (see Broker.hold).
	joining atomic.Bool

	ctx    context.Context // ends the read loop of a polling transport
	cancel context.CancelFunc

	// The read side, owned by the one reader goroutine there is at a time:
	// the attachments of a binary packet (nil until a client sends one).
	asm *protocol.BinaryAssembler
	// readers counts the reader goroutines; close waits for them before
	// the broker stops tracking the connection.
	readers sync.WaitGroup

	mu            sync.Mutex
	connectTimer  *time.Timer // until CONNECT succeeds
	hbSeq         uint32      // the heartbeat step due (heartbeat.go)
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
	queueIdle    chan struct{}     // while a drain goroutine runs: closed when it ends; nil while none runs
	queueAgain   bool              // look at the queue again after this round
	claiming     int               // claims in flight (beginClaim)
	claimCancels map[string]string // cancels that came during claims, by correlation id; nil when none is in flight

	// takenAt orders takeovers (the newest holder wins): when CONNECT
	// succeeded, unix ns, plus one for each time c took its workspace
	// again after the bus was lost (rejoin), so that c's own takeover
	// coming back on the channel is told from an earlier one of its own.
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

// start serves a tracked connection: its first reader writes the open
// packet, arms the heartbeat and the connect deadline and reads.
func (c *conn) start() {
	c.readers.Add(1)
	go func() { // waited for by close
		defer c.readers.Done()
		c.serve()
	}()
}

// serve is the first reader: the open packet, the heartbeat and the
// connect deadline, then the read loop.
func (c *conn) serve() {
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
	c.startConnectDeadline()
	c.read()
}

// read runs the read loop on the calling goroutine until the connection
// ends (then it closes it) or its socket parks.
func (c *conn) read() {
	reason, parked := c.readLoop()
	if !parked {
		c.close(reason, reason != ReasonClientClosed && reason != ReasonTransport)
	}
}

// resume starts a reader for a parked socket that became readable. It runs
// on the poller's goroutine and does not block.
func (c *conn) resume() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return // the closing goroutine reads what is left
	}
	c.readers.Add(1)
	c.mu.Unlock()
	go func() { // waited for by close
		defer c.readers.Done()
		c.read()
	}()
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
	if c.connectTimer != nil {
		c.connectTimer.Stop()
	}
	c.stopYieldWaitLocked()
	pend := c.calls.takeAllLocked()
	sub := c.sub
	c.sub = nil
	c.queue = nil
	// Calls kept while joining reached c alone unless another holder was
	// subscribed (or that is not known yet): then they are not c's to answer.
	early := c.early
	c.early, c.later = nil, nil // later: never c's alone while it rejoins
	if !c.settled || c.heard > 1 || c.rejoining {
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
		// The socket is closed: a reader still running ends now.
		c.readers.Wait()
		c.b.untrack(c)
	})
}
