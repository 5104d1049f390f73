//go:build !windows

package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/internal/handoff"
	"github.com/tetherdev/tether/protocol"
)

// disconnectGrace is how long the bridge keeps reading after the broker's
// DISCONNECT, to learn the close reason ("replaced") from the close frame
// that follows it.
const disconnectGrace = time.Second

// errDisconnected is the cause of the handler contexts of a lost connection.
var errDisconnected = errors.New("broker connection lost")

// session is one accepted connection to the broker. serve starts its read
// loop and a supervisor goroutine (ping watchdog, graceful close) and waits
// for both before it returns. Calls run on the reading goroutine; one that
// runs past handoff.DefaultAfter has the read loop move to a new goroutine
// and keeps the old one to itself (the dispatcher's handler group, not the
// session, waits for it).
type session struct {
	b            *Bridge
	conn         *websocket.Conn
	log          zerolog.Logger // carries workspace_id and sid
	pingDeadline time.Duration
	maxPayload   int

	// ioCtx governs I/O on conn: cancelling it closes the connection (that
	// is how coder/websocket ends a pending Read). It is detached from Run's
	// ctx so shutdown can say goodbye before the connection goes.
	ioCtx    context.Context
	ioCancel context.CancelCauseFunc
	// callsCtx is the parent of every handler context; it ends with Run's
	// ctx and with the connection.
	callsCtx    context.Context
	callsCancel context.CancelCauseFunc

	pinged chan struct{} // a ping arrived; buffered 1, never blocks the reader

	// The read loop's state, used by whichever goroutine reads.
	loop       *handoff.Loop
	readDone   chan error // why reading stopped, from the last reader
	readCtx    context.Context
	readCancel context.CancelFunc // of the grace after DISCONNECT
	gone       error              // the broker's DISCONNECT, once received
	asm        protocol.BinaryAssembler
	// reason is what the broker's disconnect_reason event announced for the
	// DISCONNECT that follows it.
	reason string

	mu      sync.Mutex // guards flights
	flights map[string]*flight

	wg sync.WaitGroup // supervisor and reader
}

// flight is a call whose handler runs, so tool_cancel can reach it.
type flight struct {
	cancel   context.CancelCauseFunc
	endpoint string
}

func newSession(b *Bridge, runCtx context.Context, conn *websocket.Conn, info protocol.OpenInfo, sid string) *session {
	s := &session{
		b:            b,
		conn:         conn,
		log:          b.log.With().Str("sid", sid).Logger(),
		pingDeadline: time.Duration(info.PingInterval+info.PingTimeout) * time.Millisecond,
		maxPayload:   info.MaxPayload,
		pinged:       make(chan struct{}, 1),
		flights:      make(map[string]*flight),
	}
	s.ioCtx, s.ioCancel = context.WithCancelCause(context.WithoutCancel(runCtx))
	s.callsCtx, s.callsCancel = context.WithCancelCause(runCtx)
	s.log.Info().Str("engine_sid", info.SID).Int("ping_interval_ms", info.PingInterval).
		Int("ping_timeout_ms", info.PingTimeout).Int("max_payload", info.MaxPayload).
		Msg("connected to broker")
	return s
}

// serve runs the connection until it ends and returns why.
func (s *session) serve(runCtx context.Context) error {
	s.wg.Add(1)
	go s.supervise(runCtx)
	s.readCtx = s.ioCtx
	s.readDone = make(chan error, 1)
	// The reader's count in wg passes to the goroutine that takes over.
	s.loop = handoff.New(handoff.DefaultAfter, func() { go s.read() })
	s.wg.Add(1)
	go s.read()
	err := <-s.readDone
	if s.readCancel != nil {
		s.readCancel()
	}
	s.callsCancel(errDisconnected)
	s.ioCancel(err)
	_ = s.conn.CloseNow()
	s.wg.Wait()
	return err
}

// supervise declares the connection dead when pings stop, and closes it
// politely when Run ends.
func (s *session) supervise(runCtx context.Context) {
	defer s.wg.Done()
	t := time.NewTimer(s.pingDeadline)
	defer t.Stop()
	for {
		select {
		case <-s.ioCtx.Done():
			return
		case <-s.pinged:
			t.Reset(s.pingDeadline)
		case <-t.C:
			s.log.Warn().Dur("waited", s.pingDeadline).Msg("no ping from broker; connection considered dead")
			s.ioCancel(errPingTimeout)
			return
		case <-runCtx.Done():
			// DISCONNECT lets the broker fail pending calls at once instead of
			// waiting for the socket to drop.
			ctx, cancel := context.WithTimeout(s.ioCtx, time.Second)
			_ = s.conn.Write(ctx, websocket.MessageText, disconnectFrame)
			cancel()
			_ = s.conn.Close(websocket.StatusNormalClosure, "bridge shutting down")
			return
		}
	}
}

// read runs the read loop on this goroutine until the connection fails,
// and then reports why on readDone, or until a call it runs hands the loop
// over to another goroutine.
func (s *session) read() {
	handed, err := s.readLoop()
	if handed {
		return
	}
	s.readDone <- err
	s.wg.Done()
}

// readLoop reads frames until the connection fails, and returns why; handed
// reports that a call ran long and another goroutine reads now.
func (s *session) readLoop() (handed bool, err error) {
	for {
		typ, data, err := s.conn.Read(s.readCtx)
		if err != nil {
			return false, s.readError(err, s.gone)
		}
		received := time.Now()
		if typ == websocket.MessageBinary {
			if s.onBinary(data, received) {
				return true, nil
			}
			continue
		}
		pkt, err := protocol.DecodeEIO(data)
		if err != nil {
			s.log.Warn().Err(err).Str("frame", truncate(data)).Msg("malformed packet from broker ignored")
			continue
		}
		switch pkt.Type {
		case protocol.EIOPing:
			select {
			case s.pinged <- struct{}{}:
			default:
			}
			if err := s.write(protocol.AppendEIO(nil, protocol.EIOPong, pkt.Data)); err != nil {
				s.log.Debug().Err(err).Msg("answering ping failed")
			}
		case protocol.EIOClose:
			return false, errServerClose
		case protocol.EIOMessage:
			handed, err := s.onMessage(pkt.Data, received)
			if handed {
				return true, nil
			}
			if err != nil && s.gone == nil {
				s.gone = err
				s.readCtx, s.readCancel = context.WithTimeout(s.ioCtx, disconnectGrace)
			}
		}
	}
}

// readError explains why reading stopped, preferring what the broker said.
func (s *session) readError(err, gone error) error {
	if s.ioCtx.Err() != nil {
		return context.Cause(s.ioCtx)
	}
	var ce websocket.CloseError
	if errors.As(err, &ce) && strings.Contains(ce.Reason, "replaced") {
		return errReplaced
	}
	if gone != nil {
		return gone
	}
	if errors.As(err, &ce) {
		return fmt.Errorf("broker closed the connection (status %d, reason %q)", ce.Code, ce.Reason)
	}
	return fmt.Errorf("reading from broker: %w", err)
}

// onMessage handles one Socket.IO packet. It returns an error when the
// broker ended the session (DISCONNECT, or CONNECT_ERROR after connect);
// handed reports that the read loop moved to another goroutine.
func (s *session) onMessage(data []byte, received time.Time) (handed bool, err error) {
	p, err := protocol.DecodeSIO(data)
	if err != nil {
		if len(data) > 0 && protocol.SIOType(data[0]) == protocol.SIODisconnect {
			return false, s.disconnected(disconnectReason(data[1:]))
		}
		s.log.Warn().Err(err).Str("frame", truncate(data)).Msg("malformed packet from broker ignored")
		return false, nil
	}
	if p.Namespace != "/" {
		s.log.Debug().Str("namespace", p.Namespace).Msg("packet for another namespace ignored")
		return false, nil
	}
	switch p.Type {
	case protocol.SIOEvent:
		return s.onEvent(p, received), nil
	case protocol.SIOBinaryEvent, protocol.SIOBinaryAck:
		if s.asm.Start(p) {
			return s.onAssembled(received), nil
		}
	case protocol.SIODisconnect:
		return false, s.disconnected(s.reason)
	case protocol.SIOConnectError:
		err := decodeConnectError(p.Data)
		s.log.Warn().Err(err).Msg("broker revoked the connection")
		return false, err
	}
	return false, nil
}

func (s *session) disconnected(reason string) error {
	s.log.Info().Str("reason", reason).Msg("broker sent DISCONNECT")
	return serverDisconnect(reason)
}

// onBinary, onAssembled, onEvent and onToolCall report whether the read
// loop moved to another goroutine (see onToolCall).
func (s *session) onBinary(data []byte, received time.Time) bool {
	if !s.asm.Active() {
		s.log.Warn().Int("bytes", len(data)).Msg("binary frame without a binary packet ignored")
		return false
	}
	if s.asm.Add(data) {
		return s.onAssembled(received)
	}
	return false
}

func (s *session) onAssembled(received time.Time) bool {
	p, _, err := s.asm.Packet()
	if err != nil {
		s.log.Warn().Err(err).Msg("malformed binary packet from broker ignored")
		return false
	}
	if p.Type == protocol.SIOEvent {
		return s.onEvent(p, received)
	}
	return false
}

func (s *session) onEvent(p protocol.SIOPacket, received time.Time) bool {
	args, err := p.Args()
	if err != nil || len(args) == 0 {
		s.log.Warn().Err(err).Msg("malformed event from broker ignored")
		return false
	}
	name, _ := p.EventName() // DecodeSIO checked it is a string
	switch name {
	case protocol.EventToolCall:
		return s.onToolCall(p.ID, args, received)
	case protocol.EventToolCancel:
		s.onToolCancel(args)
	case eventDisconnectReason:
		if len(args) > 1 {
			s.reason = disconnectReason(args[1])
		}
	default:
		s.log.Debug().Str("event", name).Msg("unknown event from broker ignored")
	}
	return false
}

// onToolCall answers at once what needs no handler (a bad body, an
// unroutable endpoint, a duplicate, overload) and otherwise runs the call on
// the reading goroutine: a quick handler costs no goroutine handoff, and one
// that runs past handoff.DefaultAfter keeps this goroutine while a new one
// reads on (onToolCall then reports true). Either way the call gets exactly
// one response.
func (s *session) onToolCall(ackID int64, args []json.RawMessage, received time.Time) bool {
	call, err := decodeToolCall(args)
	log := callLog{l: &s.log, id: call.CorrelationID, endpoint: call.Endpoint}
	log.Info().Int64("ack_id", ackID).Float64("timeout", call.Timeout).Msg("call received")
	// The call's span (nil when tracing is off) ends with its one response.
	sctx, span := s.b.d.startSpan(s.callsCtx, &call, received, "socket", log)
	// refuse answers a call that gets no handler.
	refuse := func(resp protocol.ToolResponse) {
		s.b.d.audited(s.callsCtx, audit.DoorSocket, &call, received, &resp)
		s.respond(ackID, resp, log, received, span)
	}
	if err != nil {
		refuse(protocol.Failure(call.CorrelationID, protocol.CodeInvalidPayload, err.Error()))
		return false
	}
	if resp, ok := precheck(&call); !ok {
		refuse(resp)
		return false
	}

	s.mu.Lock()
	if _, dup := s.flights[call.CorrelationID]; dup {
		s.mu.Unlock()
		refuse(protocol.Failure(call.CorrelationID, protocol.CodeInvalidPayload,
			"a call with this correlation_id is already running"))
		return false
	}
	if !s.b.d.tryAcquire() {
		s.mu.Unlock()
		refuse(overloaded(&call, cap(s.b.d.slots)))
		return false
	}
	ctx, cancel := context.WithCancelCause(sctx)
	s.flights[call.CorrelationID] = &flight{cancel: cancel, endpoint: call.Endpoint}
	s.mu.Unlock()

	// The dispatcher's handler group counts the call, not the session: a
	// handler that ignores its context must not hold up a reconnect.
	s.b.d.handlers.Add(1)
	return !s.loop.Do(func() {
		defer s.b.d.handlers.Done()
		s.runCall(ctx, cancel, ackID, &call, received, log, span)
	})
}

func (s *session) runCall(ctx context.Context, cancel context.CancelCauseFunc, ackID int64, call *protocol.ToolCall, received time.Time, log callLog, span trace.Span) {
	s.b.d.serveInline(ctx, call, received, log, func(resp protocol.ToolResponse) {
		// Forget the flight before answering: once the broker has the
		// answer, the same correlation id may come again at once.
		s.mu.Lock()
		delete(s.flights, call.CorrelationID)
		s.mu.Unlock()
		if s.callsCtx.Err() != nil {
			// The broker already answered workspace_disconnected (or the
			// bridge is stopping); nobody waits for this response.
			log.Info().Str("code", resp.Error).Msg("response dropped: broker connection lost")
			endSpan(span, resp)
			return
		}
		s.respond(ackID, resp, log, received, span)
	})
	cancel(nil)
}

func (s *session) onToolCancel(args []json.RawMessage) {
	c, err := decodeToolCancel(args)
	if err != nil {
		s.log.Warn().Err(err).Msg("malformed tool_cancel ignored")
		return
	}
	s.mu.Lock()
	f := s.flights[c.CorrelationID]
	s.mu.Unlock()
	if f == nil {
		s.log.Debug().Str("correlation_id", c.CorrelationID).Msg("tool_cancel for a call that is not running")
		return
	}
	log := callLog{l: &s.log, id: c.CorrelationID, endpoint: f.endpoint}
	log.Info().Str("reason", c.Reason).Msg("tool_cancel received")
	f.cancel(&cancelledByBroker{reason: c.Reason})
}

// respond sends a call's one response and ends its span (nil when tracing
// is off).
func (s *session) respond(ackID int64, resp protocol.ToolResponse, log callLog, received time.Time, span trace.Span) {
	frame, tooLarge := responseFrame(ackID, resp, s.maxPayload)
	if tooLarge {
		log.Warn().Int("max_payload", s.maxPayload).Msg("response too large for the broker; answering payload_too_large")
		resp.Success, resp.Error = false, protocol.CodePayloadTooLarge
	}
	endSpan(span, resp)
	if err := s.write(frame); err != nil {
		log.Warn().Err(err).Str("code", resp.Error).Msg("response dropped: writing to broker failed")
		return
	}
	log.Info().Int64("ack_id", ackID).Bool("success", resp.Success).Str("code", resp.Error).
		Dur("duration", time.Since(received)).Msg("response sent")
}

// write sends one frame. coder/websocket serialises concurrent writers, so
// frames never interleave. A write stuck longer than the ping deadline means
// the connection is dead; its context expiring closes the connection.
func (s *session) write(frame []byte) error {
	ctx, cancel := context.WithTimeout(s.ioCtx, s.pingDeadline)
	defer cancel()
	return s.conn.Write(ctx, websocket.MessageText, frame)
}
