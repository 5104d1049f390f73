package eio

import (
	"context"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/protocol"
)

// Reasons a session ends for, of this package's own; the Handler may end
// it for reasons of its own (Session.Close). They are logged, and sent to
// the client in the closing handshake.
const (
	ReasonShutdown     = "server shutting down"
	ReasonPingTimeout  = "ping timeout"
	ReasonMalformed    = "malformed packet"
	ReasonClientClosed = "client disconnect"
	ReasonTransport    = "transport error"
	ReasonTooLarge     = "message over maxPayload"
	ReasonNoConnect    = "connect timeout"
)

// Handler serves the Socket.IO packets of one session: the broker's
// routing core. Its methods are called by the session's reader (Packet)
// and by whichever goroutine ends it (Ended), never under the session's
// lock.
type Handler interface {
	// Packet handles one Socket.IO packet of the client (binary ones
	// assembled); a non-empty result ends the session with that reason.
	Packet(p protocol.SIOPacket) string
	// Ended is told once that the session ends, and why, before its
	// transport closes; it may block (a bus unsubscribe). notify says
	// whether the client is to be told why: the frames Ended returns then
	// are written to it before the closing handshake.
	Ended(reason string, notify bool) (final [][]byte)
}

// Session is one client's Engine.IO session: its transport, its read
// loop, its queue of frames to write, its heartbeat and its end. A reader
// goroutine runs the read loop while the client talks; on a WebSocket that
// has been quiet for a while the reader ends and the poller starts a new
// one when the client sends again (sock.go). Frames go out through a queue
// written by a goroutine that exists only while there is something to
// write (writeQueued). So an idle WebSocket session has no goroutine.
//
// Concurrency: every exported method may be called from any goroutine.
// The fields below mu are guarded by it; no I/O happens under it. Lock
// order: the Handler's locks, then mu, then the heartbeat scheduler's.
type Session struct {
	srv    *Server
	tr     transport
	h      Handler
	id     string // Engine.IO sid
	remote string
	bearer string // token from the upgrade's Authorization header
	// hs is the session's place among its address's handshakes in
	// progress (limit.go), given back by EndHandshake or at the end.
	hs *handshake

	ctx    context.Context // ends with the session: a polling transport's read loop, the store steps of its holder's drains
	cancel context.CancelFunc

	// The read side, owned by the one reader goroutine there is at a time:
	// the attachments of a binary packet (nil until a client sends one).
	asm *protocol.BinaryAssembler
	// readers counts the reader goroutines; the end waits for them before
	// the server stops tracking the session.
	readers sync.WaitGroup

	mu sync.Mutex
	// The connect deadline (until Release), and the heartbeat
	// (heartbeat.go): the step due and whether a pong is awaited.
	connectTimer *time.Timer
	hbSeq        uint32
	awaitingPong bool
	// The write queue (session_write.go).
	queue   [][]byte
	spare   [][]byte
	writing bool
	held    bool // the writer waits: the CONNECT ack goes out first (Release)
	closed  bool
}

// ID is the session's Engine.IO sid.
func (s *Session) ID() string { return s.id }

// Bind makes h the session's Handler. An accept function that makes the
// session reachable by other goroutines before it returns (registers it
// where a shutdown finds and closes it) calls Bind first, so a Close from
// there finds its Handler; otherwise the Handler accept returns is bound
// after it returns.
func (s *Session) Bind(h Handler) { s.h = h }

// Remote is the client's address: the peer's, or behind a trusted proxy
// the client its X-Forwarded-For names (proxy.Trust.Client).
func (s *Session) Remote() string { return s.remote }

// Bearer is the token of the first request's Authorization header ("" when
// none): a client may authenticate with it instead of its CONNECT payload.
func (s *Session) Bearer() string { return s.bearer }

// Context ends when the session has ended (its transport closed).
func (s *Session) Context() context.Context { return s.ctx }

// Log adds the session's fields (sid, remote) to a log event; nil stays
// nil, and then nothing is computed.
func (s *Session) Log(e *zerolog.Event) *zerolog.Event {
	if e == nil {
		return nil
	}
	return e.Str("sid", s.id).Str("remote", s.remote)
}

// EndHandshake ends the session's handshake: its client proved who it is,
// whatever comes of it, so its place among its address's handshakes in
// progress (the connection limits) is given back, and the connect
// deadline stops.
func (s *Session) EndHandshake() {
	s.hs.release()
	s.mu.Lock()
	if s.connectTimer != nil {
		s.connectTimer.Stop()
		s.connectTimer = nil
	}
	s.mu.Unlock()
}

// start serves a tracked session: its first reader writes the open
// packet, arms the heartbeat and the connect deadline and reads.
func (s *Session) start() {
	s.readers.Add(1)
	go func() { // waited for by the end (close)
		defer s.readers.Done()
		s.serve()
	}()
}

// serve is the first reader: the open packet, the heartbeat and the
// connect deadline, then the read loop.
func (s *Session) serve() {
	var upgrades []string
	if _, polling := s.tr.(*pollTransport); polling {
		upgrades = []string{"websocket"}
	}
	cfg := &s.srv.cfg
	open := protocol.EncodeOpen(protocol.OpenInfo{
		SID:          s.id,
		Upgrades:     upgrades,
		PingInterval: int(cfg.PingInterval / time.Millisecond),
		PingTimeout:  int(cfg.PingTimeout / time.Millisecond),
		MaxPayload:   cfg.MaxPayload,
	})
	if err := s.WriteNow(open); err != nil {
		s.Close(ReasonTransport, false)
		return
	}
	s.startHeartbeat()
	s.startConnectDeadline()
	s.read()
}

// startConnectDeadline ends the session if neither EndHandshake nor
// Release comes within the connect timeout.
func (s *Session) startConnectDeadline() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.held {
		return
	}
	s.connectTimer = time.AfterFunc(s.srv.cfg.ConnectTimeout, func() {
		s.mu.Lock()
		late := s.held && !s.closed
		s.mu.Unlock()
		if late {
			s.Log(s.srv.log.Info()).Msg("no CONNECT within the connect timeout")
			s.Close(ReasonNoConnect, false)
		}
	})
}

// read runs the read loop on the calling goroutine until the session
// ends (then it closes it) or its socket parks.
func (s *Session) read() {
	reason, parked := s.readLoop()
	if !parked {
		s.Close(reason, reason != ReasonClientClosed && reason != ReasonTransport)
	}
}

// resume starts a reader for a parked socket that became readable. It
// runs on the poller's goroutine and does not block.
func (s *Session) resume() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return // the closing goroutine reads what is left
	}
	s.readers.Add(1)
	s.mu.Unlock()
	go func() { // waited for by the end (close)
		defer s.readers.Done()
		s.read()
	}()
}

// Close ends the session once: the Handler is told (Ended), the frames it
// returns go out when notify is set, and the transport closes with a
// status for reason. It does not wait for the closing handshake, which
// runs on a goroutine of the server.
func (s *Session) Close(reason string, notify bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.hs.release()
	if s.connectTimer != nil {
		s.connectTimer.Stop()
	}
	s.queue = nil
	s.mu.Unlock()
	final := s.h.Ended(reason, notify)

	// Closing handshakes wait on the peer; do it off the caller's goroutine
	// (which may be a bus handler), owned by the server's wait group.
	s.srv.wg.Go(func() {
		for _, f := range final {
			_ = s.WriteNow(f)
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
			_ = s.tr.close(status, reason)
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			_ = s.tr.closeNow()
			<-done
		}
		s.cancel()
		// The socket is closed: a reader still running ends now.
		s.readers.Wait()
		s.srv.untrack(s)
	})
}
