package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/protocol"
)

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

// maxAttachments bounds the binary frames one packet may announce.
const maxAttachments = 16

// EventDisconnectReason tells a client why the broker is about to disconnect
// it; Socket.IO's DISCONNECT packet carries no reason of its own.
const EventDisconnectReason = "disconnect_reason"

// conn is one WebSocket client. The HTTP handler goroutine runs its read
// loop; frames go out through a queue drained by a goroutine that exists only
// while there is something to write, so an idle connection costs one
// goroutine. All state below mu is guarded by it; no I/O happens under it.
type conn struct {
	b      *Broker
	tr     transport
	id     string // Engine.IO sid, also the holder id in takeovers
	remote string
	bearer string // token from the upgrade's Authorization header
	since  int64  // when CONNECT succeeded, unix ns: newest holder wins
	// workspace is set once, when CONNECT succeeds; read it with
	// workspaceID from any goroutine (timers and log lines read it too).
	workspace atomic.Pointer[string]
	// joining is set from subscribing to the workspace channel until the
	// connection's own takeover has come back on it and hold knows whether
	// another holder was subscribed (see Broker.hold).
	joining atomic.Bool

	ctx    context.Context // ends the read loop
	cancel context.CancelFunc

	mu           sync.Mutex
	hbTimer      *time.Timer
	awaitingPong bool
	queue        [][]byte
	spare        [][]byte
	writing      bool
	held         bool // writer waits until the CONNECT ack is queued first
	closed       bool
	replaced     bool // a newer holder took the workspace: stay silent on calls
	sub          bus.Subscription
	calls        callTable // guarded by mu too

	// While joining (see Broker.hold).
	echoed  bool                // own takeover seen on the channel
	settled bool                // hold knows shared
	shared  bool                // another holder was subscribed when the takeover went out
	early   []protocol.ToolCall // calls that arrived while joining
}

func newSID() string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// handleSocket upgrades an Engine.IO v4 WebSocket request and serves it until
// it closes.
func (b *Broker) handleSocket(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("EIO") != "4" {
		writeEIOError(w, http.StatusBadRequest, 5, "Unsupported protocol version")
		return
	}
	if b.isDraining() {
		writeEIOError(w, http.StatusServiceUnavailable, 4, "Broker shutting down")
		return
	}
	sid := q.Get("sid")
	switch q.Get("transport") {
	case "polling":
		b.handlePolling(w, r, sid)
		return
	case "websocket":
		if sid != "" {
			b.upgrade(w, r, sid)
			return
		}
	default:
		writeEIOError(w, http.StatusBadRequest, 0, "Transport unknown")
		return
	}
	ws, err := websocket.Accept(w, r, acceptOptions)
	if err != nil {
		b.log.Debug().Err(err).Str("remote", r.RemoteAddr).Msg("websocket accept failed")
		return
	}
	ws.SetReadLimit(int64(b.cfg.MaxPayload))
	c := b.newConn(r)
	c.tr = wsTransport{ws}
	if !b.track(c) {
		_ = ws.Close(websocket.StatusGoingAway, ReasonShutdown)
		c.cancel()
		return
	}
	defer b.untrack(c)
	c.serve()
}

var acceptOptions = &websocket.AcceptOptions{
	// Clients authenticate with a token, not cookies, so a foreign origin
	// gains nothing; IDE webviews send odd origins.
	InsecureSkipVerify: true,
	CompressionMode:    websocket.CompressionDisabled,
}

// newConn builds the state of a client connection from its first request;
// the caller sets its transport.
func (b *Broker) newConn(r *http.Request) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{
		b:      b,
		id:     newSID(),
		remote: r.RemoteAddr,
		ctx:    ctx,
		cancel: cancel,
		held:   true,
	}
	c.calls = newCallTable(&c.mu, c, b.log, b.metrics.inFlight, b.metrics.duplicates)
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		c.bearer = strings.TrimPrefix(h, "Bearer ")
	}
	return c
}

func writeEIOError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": msg})
}

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
	// Heartbeat: the server pings (Engine.IO v4) and expects a pong within
	// pingTimeout. Both are timers, not goroutines.
	c.mu.Lock()
	c.hbTimer = time.AfterFunc(c.b.cfg.PingInterval, c.heartbeat)
	c.mu.Unlock()
	connectTimer := time.AfterFunc(c.b.cfg.ConnectTimeout, func() {
		c.mu.Lock()
		connected := c.workspaceID() != ""
		c.mu.Unlock()
		if !connected {
			c.event(c.b.log.Info()).Msg("no CONNECT within the connect timeout")
			c.close("connect timeout", false)
		}
	})
	defer connectTimer.Stop()

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

// heartbeat fires every pingInterval to send a ping and, while a ping is
// unanswered, after pingTimeout to end the connection.
func (c *conn) heartbeat() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	late := c.awaitingPong
	c.awaitingPong = true
	if !late {
		c.hbTimer.Reset(c.b.cfg.PingTimeout)
	}
	c.mu.Unlock()
	if late {
		c.event(c.b.log.Info()).Msg("no pong within ping timeout")
		c.close(ReasonPingTimeout, true)
		return
	}
	if err := c.writeNow([]byte{byte(protocol.EIOPing)}); err != nil {
		c.close(ReasonTransport, false)
	}
}

func (c *conn) pong() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.awaitingPong {
		return
	}
	c.awaitingPong = false
	c.hbTimer.Reset(c.b.cfg.PingInterval)
}

// writeNow writes one frame directly. coder/websocket serialises concurrent
// writers, so frames never interleave with the queue's. Its context is not
// the read loop's: the goodbye frames are written after that ended, and
// closing the socket unblocks a stuck write anyway.
func (c *conn) writeNow(frame []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.b.cfg.WriteTimeout)
	defer cancel()
	return c.tr.write(ctx, frame)
}

// enqueue adds a frame to the outgoing queue. It never blocks; it returns
// false when the connection is closed or its queue is full (a client that
// does not read).
func (c *conn) enqueueLocked(frame []byte) bool {
	if c.closed || len(c.queue) >= c.b.cfg.MaxInFlight+64 {
		return false
	}
	c.queue = append(c.queue, frame)
	return true
}

// kickLocked starts the writer if frames wait and none runs. It returns
// whether the caller must start it (outside the lock).
func (c *conn) kickLocked() bool {
	if c.writing || c.held || c.closed || len(c.queue) == 0 {
		return false
	}
	c.writing = true
	return true
}

func (c *conn) startWriter() { c.b.wg.Go(c.drain) }

func (c *conn) drain() {
	for {
		c.mu.Lock()
		if c.closed || len(c.queue) == 0 {
			c.writing = false
			c.mu.Unlock()
			return
		}
		batch := c.queue
		c.queue = c.spare[:0]
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), c.b.cfg.WriteTimeout)
		for i, f := range batch {
			if err := c.tr.write(ctx, f); err != nil {
				cancel()
				c.event(c.b.log.Debug()).Err(err).Msg("write failed")
				c.mu.Lock()
				c.writing = false
				c.mu.Unlock()
				c.close(ReasonTransport, false)
				return
			}
			batch[i] = nil
		}
		cancel()
		c.mu.Lock()
		c.spare = batch[:0]
		c.mu.Unlock()
	}
}

func (c *conn) send(frame []byte) bool {
	c.mu.Lock()
	ok := c.enqueueLocked(frame)
	start := c.kickLocked()
	c.mu.Unlock()
	if start {
		c.startWriter()
	}
	return ok
}

// readLoop reads until the connection ends and returns why.
func (c *conn) readLoop() string {
	var asm protocol.BinaryAssembler
	for {
		binary, data, err := c.tr.read(c.ctx)
		if err != nil {
			switch {
			case websocket.CloseStatus(err) == websocket.StatusMessageTooBig:
				c.event(c.b.log.Info()).Msg("client sent a message over maxPayload")
				return "message over maxPayload"
			case websocket.CloseStatus(err) != -1:
				return ReasonClientClosed
			case c.ctx.Err() != nil:
				return "closed"
			case errors.Is(err, websocket.ErrMessageTooBig) || strings.Contains(err.Error(), "read limited"):
				return "message over maxPayload"
			}
			return ReasonTransport
		}
		if binary {
			if !asm.Active() {
				return c.malformed(fmt.Errorf("unexpected binary frame"))
			}
			if asm.Add(data) {
				p, _, err := asm.Packet()
				if err != nil {
					return c.malformed(err)
				}
				if reason := c.handleSIO(p); reason != "" {
					return reason
				}
			}
			continue
		}
		if asm.Active() {
			return c.malformed(fmt.Errorf("text frame while binary attachments are due"))
		}
		pkt, err := protocol.DecodeEIO(data)
		if err != nil {
			return c.malformed(err)
		}
		switch pkt.Type {
		case protocol.EIOPong:
			c.pong()
		case protocol.EIOPing:
			// v3-style client ping: answer it, harmless in v4.
			c.send(protocol.AppendEIO(nil, protocol.EIOPong, pkt.Data))
		case protocol.EIOClose:
			return ReasonClientClosed
		case protocol.EIONoop:
		case protocol.EIOMessage:
			sp, err := protocol.DecodeSIO(pkt.Data)
			if err != nil {
				return c.malformed(err)
			}
			if sp.Type == protocol.SIOBinaryEvent || sp.Type == protocol.SIOBinaryAck {
				// Each attachment is bounded by the read limit; bound their
				// number too, or a client could make us buffer without end.
				if sp.Attachments > maxAttachments {
					return c.malformed(fmt.Errorf("%d binary attachments, over %d", sp.Attachments, maxAttachments))
				}
				if !asm.Start(sp) {
					continue
				}
				if sp, _, err = asm.Packet(); err != nil {
					return c.malformed(err)
				}
			}
			if reason := c.handleSIO(sp); reason != "" {
				return reason
			}
		default:
			return c.malformed(fmt.Errorf("unexpected engine.io packet %s", pkt.Type))
		}
	}
}

func (c *conn) malformed(err error) string {
	c.b.metrics.badPackets.Inc()
	c.event(c.b.log.Info()).Err(err).Msg("closing connection: malformed packet")
	return ReasonMalformed
}

// handleSIO handles one Socket.IO packet; a non-empty result ends the
// connection with that reason.
func (c *conn) handleSIO(p protocol.SIOPacket) string {
	c.mu.Lock()
	connected := c.workspaceID() != ""
	c.mu.Unlock()
	if p.Type == protocol.SIOConnect {
		if connected {
			return c.malformed(fmt.Errorf("second CONNECT"))
		}
		// The handshake (token check, registration) needs a deep stack;
		// run on the read loop it would grow that stack for the life of
		// the connection. A goroutine of its own gives it back at once.
		done := make(chan string, 1)
		go func() { done <- c.handleConnect(p) }()
		return <-done
	}
	if !connected {
		return c.malformed(fmt.Errorf("%s before CONNECT", p.Type))
	}
	if p.Namespace != "/" {
		return "" // nothing is served on other namespaces
	}
	switch p.Type {
	case protocol.SIODisconnect:
		return ReasonClientClosed
	case protocol.SIOAck:
		args, err := p.Args()
		if err != nil {
			return c.malformed(err)
		}
		if len(args) == 0 {
			c.event(c.b.log.Debug()).Int64("ack", p.ID).Msg("empty ack ignored")
			return ""
		}
		resp, ok, err := protocol.DecodeResponse(args[0])
		if err != nil || !ok {
			c.event(c.b.log.Debug()).Int64("ack", p.ID).Msg("ack without a response ignored")
			return ""
		}
		c.calls.answer(resp, p.ID)
	case protocol.SIOEvent:
		name, _ := p.EventName() // validated by DecodeSIO
		if p.HasAck() {
			// The client asked for an acknowledgement of its event.
			c.send(protocol.EncodeAck(p.ID))
		}
		if name != protocol.EventToolResponse {
			return ""
		}
		args, err := p.Args()
		if err != nil || len(args) < 2 {
			c.event(c.b.log.Debug()).Msg("tool_response without a body ignored")
			return ""
		}
		resp, ok, err := protocol.DecodeResponse(args[1])
		if err != nil || !ok || resp.CorrelationID == "" {
			c.event(c.b.log.Debug()).Msg("tool_response without correlation_id ignored")
			return ""
		}
		c.calls.answer(resp, protocol.NoAck)
	case protocol.SIOConnectError:
		return c.malformed(fmt.Errorf("CONNECT_ERROR from a client"))
	}
	return ""
}

type connectAuth struct {
	Token       string `json:"token"`
	WorkspaceID string `json:"workspace_id"`
	Workspace   string `json:"workspace"`
}

func (c *conn) handleConnect(p protocol.SIOPacket) string {
	if p.Namespace != "/" {
		c.connectError(p.Namespace, "Invalid namespace", protocol.CodeInvalidRequest)
		return "" // the client may still connect to "/"
	}
	var auth connectAuth
	if len(p.Data) > 0 {
		if err := json.Unmarshal(p.Data, &auth); err != nil {
			c.connectError("/", "CONNECT auth must be an object with token and workspace_id", protocol.CodeInvalidRequest)
			return "bad CONNECT"
		}
	}
	token := auth.Token
	if token == "" {
		token = c.bearer
	}
	ws := auth.WorkspaceID
	if ws == "" {
		ws = auth.Workspace
	}
	claims, err := c.b.auth.verify(token, RoleBridge, ws)
	if err == nil && ws == "" {
		if len(claims.Workspaces) == 1 && claims.Workspaces[0] != AnyWorkspace {
			ws = claims.Workspaces[0]
		} else {
			err = protocol.Errorf(protocol.CodeInvalidRequest, "workspace_id is required")
		}
	}
	if err != nil {
		var pe *protocol.Error
		errors.As(err, &pe)
		c.event(c.b.log.Info()).Str("workspace_id", ws).Str("code", pe.Code).Msg("CONNECT refused: " + pe.Message)
		c.connectError("/", pe.Message, pe.Code)
		return "CONNECT refused"
	}
	if err := c.b.hold(c, ws); err != nil {
		c.event(c.b.log.Warn()).Err(err).Msg("registering workspace failed")
		c.connectError("/", "broker cannot serve the workspace: "+err.Error(), protocol.CodeBrokerShutdown)
		return "register failed"
	}
	return ""
}

func (c *conn) connectError(ns, msg, code string) {
	data, _ := json.Marshal(map[string]any{"message": msg, "data": map[string]string{"code": code}})
	_ = c.writeNow(protocol.AppendMessage(nil, protocol.SIOPacket{Type: protocol.SIOConnectError, Namespace: ns, ID: protocol.NoAck, Data: data}))
}

// connected queues the CONNECT ack ahead of any call that arrived since the
// subscription started, then lets the writer run.
func (c *conn) connected(ws string) bool {
	ack, _ := json.Marshal(map[string]string{"sid": c.id})
	frame := protocol.AppendMessage(nil, protocol.SIOPacket{Type: protocol.SIOConnect, ID: protocol.NoAck, Data: ack})
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.queue = append([][]byte{frame}, c.queue...)
	c.held = false
	start := c.kickLocked()
	c.mu.Unlock()
	if start {
		c.startWriter()
	}
	return true
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
			_ = c.writeNow([]byte("41"))
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

// onBusMessage handles a message on the workspace channel. It runs on the
// bus's delivery goroutine and never blocks.
func (c *conn) onBusMessage(msg []byte) {
	var m protocol.BusMessage
	if err := protocol.DecodeBusMessage(msg, &m); err != nil {
		c.event(c.b.log.Warn()).Err(err).Msg("undecodable message on workspace channel")
		return
	}
	switch m.Type {
	case protocol.BusCall:
		if c.joining.Load() && c.holdEarly(m.ToolCall) {
			return
		}
		c.deliver(m.ToolCall, nil)
	case protocol.BusCancel:
		c.calls.cancel(m.CorrelationID, m.Reason)
	case protocol.BusTakeover:
		c.takeover(m)
	default:
		c.event(c.b.log.Debug()).Str("type", m.Type).Msg("unknown bus message type ignored")
	}
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

// holdEarly keeps a call that arrived while c is joining and before its own
// takeover came back; false when the caller should deliver it: c finished
// joining, or the call came after the takeover (the older holder ignores
// those, so they are c's whatever hold learns).
func (c *conn) holdEarly(call protocol.ToolCall) bool {
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
		c.deliver(call, nil)
	}
}

// deliver registers a call and queues it for the client, or answers it at
// once when it cannot be delivered. The answer goes to waiter when it is set,
// else to call.ReplyTo.
func (c *conn) deliver(call protocol.ToolCall, waiter chan<- protocol.ToolResponse) {
	if call.ReplyTo == "" && waiter == nil {
		c.callEvent(c.b.log.Warn(), &call).Msg("call without reply_to dropped: nobody to answer")
		return
	}
	if err := call.Validate(); err != nil {
		c.calls.refuse(call, waiter, protocol.FailureFrom(call.CorrelationID, err, protocol.CodeInvalidRequest))
		return
	}
	now := time.Now()
	deadline := now.Add(call.TimeoutDuration())
	if call.DeadlineMS > 0 {
		deadline = time.UnixMilli(call.DeadlineMS)
	}
	remaining := deadline.Sub(now)
	if remaining <= 0 {
		c.calls.refuse(call, waiter, protocol.Failure(call.CorrelationID, protocol.CodeTimeout, "deadline passed before delivery"))
		return
	}

	// The payload came out of a validating decoder (the bus message or
	// the HTTP body): it is copied, not parsed again.
	body := protocol.AppendToolCall(make([]byte, 0, 96+len(call.Payload)), &protocol.ToolCall{
		CorrelationID: call.CorrelationID,
		Endpoint:      call.Endpoint,
		Payload:       call.Payload,
		Timeout:       remaining.Seconds(),
	})

	c.mu.Lock()
	if c.replaced && waiter == nil {
		c.mu.Unlock()
		return // the new holder also received it from the bus and answers
	}
	verdict, fail := c.admitLocked(&call, waiter)
	if verdict == admitted {
		ack := c.calls.nextAckLocked()
		frame := protocol.EncodeEvent(ack, protocol.EventToolCall, body)
		switch {
		case len(frame) > c.b.cfg.MaxPayload:
			verdict, fail = refused, protocol.Failure(call.CorrelationID, protocol.CodePayloadTooLarge, fmt.Sprintf("call is %d bytes, over the %d byte limit", len(frame), c.b.cfg.MaxPayload))
		case !c.enqueueLocked(frame):
			verdict, fail = refused, protocol.Failure(call.CorrelationID, protocol.CodeOverloaded, "client is not reading its socket")
		default:
			c.calls.addLocked(call, ack, waiter, remaining)
		}
	}
	start := verdict == admitted && c.kickLocked()
	c.mu.Unlock()
	switch verdict {
	case resent:
		c.callEvent(c.b.log.Debug(), &call).Msg("duplicate delivery of a call in flight dropped")
		return
	case refused:
		c.calls.refuse(call, waiter, fail)
		return
	}
	c.callEvent(c.b.log.Debug(), &call).Msg("call delivered to socket")
	if start {
		// Write the frame on this goroutine and save a handoff: a caller
		// of this process waits for the answer anyway, and a Redis bus
		// moves its reading to another goroutine if the write blocks (the
		// workspace's later calls wait for this one, as they would in the
		// queue).
		c.drain()
	}
}

// admitLocked decides whether c takes call: not when it was replaced or
// closed, otherwise as its call table decides.
func (c *conn) admitLocked(call *protocol.ToolCall, waiter chan<- protocol.ToolResponse) (admission, protocol.ToolResponse) {
	switch {
	case c.replaced:
		return refused, protocol.Failure(call.CorrelationID, protocol.CodeWorkspaceDisconnected, "workspace client was replaced by a newer connection")
	case c.closed:
		return refused, protocol.Failure(call.CorrelationID, protocol.CodeWorkspaceDisconnected, "workspace client disconnected")
	}
	return c.calls.admitLocked(call, waiter == nil, c.b.cfg.MaxInFlight)
}

// reply implements callOwner.
func (c *conn) reply(call protocol.ToolCall, waiter chan<- protocol.ToolResponse, resp protocol.ToolResponse) {
	c.b.reply(call, waiter, resp)
}

// sendCancel implements callOwner: it queues a tool_cancel for the client.
func (c *conn) sendCancel(cid, reason string) {
	body, _ := json.Marshal(protocol.ToolCancel{CorrelationID: cid, Reason: reason})
	c.send(protocol.EncodeEvent(protocol.NoAck, protocol.EventToolCancel, body))
}
