package broker

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/protocol"
)

// The read side of a connection: one reader goroutine at a time (conn.read)
// reads the client's Engine.IO packets, assembles binary attachments and
// handles each Socket.IO packet.

// maxAttachments bounds the binary frames one packet may announce.
const maxAttachments = 16

// readLoop reads until the connection ends and returns why, or until its
// socket parks (parked true): the client was quiet, and the poller starts a
// new reader when it sends again.
func (c *conn) readLoop() (reason string, parked bool) {
	p, canPark := c.tr.(parker)
	for {
		if canPark && !c.assembling() && p.quiet() && p.park() {
			return "", true
		}
		if reason := c.readOne(); reason != "" {
			return reason, false
		}
	}
}

// readOne reads and handles one packet; a non-empty result ends the
// connection with that reason.
func (c *conn) readOne() string {
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
	asm := c.asm
	if binary {
		if !c.assembling() {
			return c.malformed(fmt.Errorf("unexpected binary frame"))
		}
		if !asm.Add(data) {
			return ""
		}
		p, _, err := asm.Packet()
		if err != nil {
			return c.malformed(err)
		}
		return c.handleSIO(p)
	}
	if c.assembling() {
		return c.malformed(fmt.Errorf("text frame while binary attachments are due"))
	}
	// RFC 6455 requires text frames to be UTF-8. Checked here, once
	// for both transports, so an answer's result reaches its caller
	// as valid JSON text (a caller's strict UTF-8 decoder would choke).
	if !utf8.Valid(data) {
		return c.malformed(errors.New("text frame is not valid UTF-8"))
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
			if asm == nil {
				asm = new(protocol.BinaryAssembler)
				c.asm = asm
			}
			if !asm.Start(sp) {
				return ""
			}
			if sp, _, err = asm.Packet(); err != nil {
				return c.malformed(err)
			}
		}
		return c.handleSIO(sp)
	default:
		return c.malformed(fmt.Errorf("unexpected engine.io packet %s", pkt.Type))
	}
	return ""
}

// assembling reports whether binary attachments are due.
func (c *conn) assembling() bool { return c.asm != nil && c.asm.Active() }

func (c *conn) malformed(err error) string {
	c.b.metrics.badPackets.Inc()
	c.event(c.b.log.Info()).Err(err).Msg("closing connection: malformed packet")
	return ReasonMalformed
}

// handleSIO handles one Socket.IO packet; a non-empty result ends the
// connection with that reason.
func (c *conn) handleSIO(p protocol.SIOPacket) string {
	connected := c.workspaceID() != "" // an atomic: no lock
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
		resp.Result = bytes.Clone(resp.Result) // it aliases the read buffer
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
		resp.Result = bytes.Clone(resp.Result) // it aliases the read buffer
		c.calls.answer(resp, protocol.NoAck)
	case protocol.SIOConnectError:
		return c.malformed(fmt.Errorf("CONNECT_ERROR from a client"))
	}
	return ""
}
