package broker

import (
	"bytes"
	"fmt"

	"github.com/tetherdev/tether/broker/eio"
	"github.com/tetherdev/tether/protocol"
)

// The client's Socket.IO packets, as its session's reader hands them over
// (eio.Handler): CONNECT (handshake.go), and the answers to calls (acks
// and tool_response events), which end calls in the table (calls.go).

// Packet implements eio.Handler: it handles one Socket.IO packet of the
// client; a non-empty result ends the connection with that reason.
func (c *conn) Packet(p protocol.SIOPacket) string {
	connected := c.WorkspaceID() != "" // an atomic: no lock
	if p.Type == protocol.SIOConnect {
		if connected {
			return c.s.Malformed(fmt.Errorf("second CONNECT"))
		}
		// The handshake (token check, registration) needs a deep stack;
		// run on the read loop it would grow that stack for the life of
		// the connection. A goroutine of its own gives it back at once.
		done := make(chan string, 1)
		go func() { done <- c.handleConnect(p) }()
		return <-done
	}
	if !connected {
		return c.s.Malformed(fmt.Errorf("%s before CONNECT", p.Type))
	}
	if p.Namespace != "/" {
		return "" // nothing is served on other namespaces
	}
	switch p.Type {
	case protocol.SIODisconnect:
		return eio.ReasonClientClosed
	case protocol.SIOAck:
		args, err := p.Args()
		if err != nil {
			return c.s.Malformed(err)
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
		return c.s.Malformed(fmt.Errorf("CONNECT_ERROR from a client"))
	}
	return ""
}
