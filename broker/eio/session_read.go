package eio

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/protocol"
)

// The read side of a session: one reader goroutine at a time
// (Session.read) reads the client's Engine.IO packets, answers what is
// Engine.IO's (pings, pongs, noops, close), assembles binary attachments
// and hands each Socket.IO packet to the Handler.

// maxAttachments bounds the binary frames one packet may announce.
const maxAttachments = 16

// readLoop reads until the connection ends and returns why, or until its
// socket parks (parked true): the client was quiet, and the poller starts a
// new reader when it sends again.
func (s *Session) readLoop() (reason string, parked bool) {
	p, canPark := s.tr.(parker)
	for {
		if canPark && !s.assembling() && p.quiet() && p.park() {
			return "", true
		}
		if reason := s.readOne(); reason != "" {
			return reason, false
		}
	}
}

// readOne reads and handles one packet; a non-empty result ends the
// connection with that reason.
func (s *Session) readOne() string {
	binary, data, err := s.tr.read(s.ctx)
	if err != nil {
		switch {
		case websocket.CloseStatus(err) == websocket.StatusMessageTooBig:
			s.Log(s.srv.log.Info()).Msg("client sent a message over maxPayload")
			return ReasonTooLarge
		case websocket.CloseStatus(err) != -1:
			return ReasonClientClosed
		case s.ctx.Err() != nil:
			return "closed"
		case errors.Is(err, websocket.ErrMessageTooBig) || strings.Contains(err.Error(), "read limited"):
			return ReasonTooLarge
		}
		return ReasonTransport
	}
	asm := s.asm
	if binary {
		if !s.assembling() {
			return s.Malformed(fmt.Errorf("unexpected binary frame"))
		}
		if !asm.Add(data) {
			return ""
		}
		p, _, err := asm.Packet()
		if err != nil {
			return s.Malformed(err)
		}
		return s.h.Packet(p)
	}
	if s.assembling() {
		return s.Malformed(fmt.Errorf("text frame while binary attachments are due"))
	}
	// RFC 6455 requires text frames to be UTF-8. Checked here, once
	// for both transports, so an answer's result reaches its caller
	// as valid JSON text (a caller's strict UTF-8 decoder would choke).
	if !utf8.Valid(data) {
		return s.Malformed(errors.New("text frame is not valid UTF-8"))
	}
	pkt, err := protocol.DecodeEIO(data)
	if err != nil {
		return s.Malformed(err)
	}
	switch pkt.Type {
	case protocol.EIOPong:
		s.pong()
	case protocol.EIOPing:
		// v3-style client ping: answer it, harmless in v4.
		_ = s.Send(protocol.AppendEIO(nil, protocol.EIOPong, pkt.Data))
	case protocol.EIOClose:
		return ReasonClientClosed
	case protocol.EIONoop:
	case protocol.EIOMessage:
		sp, err := protocol.DecodeSIO(pkt.Data)
		if err != nil {
			return s.Malformed(err)
		}
		if sp.Type == protocol.SIOBinaryEvent || sp.Type == protocol.SIOBinaryAck {
			// Each attachment is bounded by the read limit; bound their
			// number too, or a client could make us buffer without end.
			if sp.Attachments > maxAttachments {
				return s.Malformed(fmt.Errorf("%d binary attachments, over %d", sp.Attachments, maxAttachments))
			}
			if asm == nil {
				asm = new(protocol.BinaryAssembler)
				s.asm = asm
			}
			if !asm.Start(sp) {
				return ""
			}
			if sp, _, err = asm.Packet(); err != nil {
				return s.Malformed(err)
			}
		}
		return s.h.Packet(sp)
	default:
		return s.Malformed(fmt.Errorf("unexpected engine.io packet %s", pkt.Type))
	}
	return ""
}

// assembling reports whether binary attachments are due.
func (s *Session) assembling() bool { return s.asm != nil && s.asm.Active() }

// Malformed ends the session's read loop for a packet that breaks the
// protocol: it is counted and logged, and the result is the reason to
// return (from Handler.Packet too).
func (s *Session) Malformed(err error) string {
	s.srv.cfg.OnMalformed()
	s.Log(s.srv.log.Info()).Err(err).Msg("closing connection: malformed packet")
	return ReasonMalformed
}
