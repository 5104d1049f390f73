package broker

import (
	"context"

	"github.com/coder/websocket"
)

// transport carries Engine.IO packets between the broker and one client:
// a WebSocket, or HTTP long-polling that may upgrade to a WebSocket. A
// connection's read loop is the only reader; writes may come from any
// goroutine and never interleave.
type transport interface {
	// read returns the client's next packet: a text Engine.IO packet, or
	// a binary attachment (binary true).
	read(ctx context.Context) (binary bool, data []byte, err error)
	// write sends one text Engine.IO packet.
	write(ctx context.Context, frame []byte) error
	// close ends the transport politely (a WebSocket closing handshake
	// with status and reason); closeNow ends it at once.
	close(status websocket.StatusCode, reason string) error
	closeNow() error
}

// wsTransport is a client connected over WebSocket from the start.
type wsTransport struct{ ws *websocket.Conn }

func (t wsTransport) read(ctx context.Context) (bool, []byte, error) {
	typ, data, err := t.ws.Read(ctx)
	return typ == websocket.MessageBinary, data, err
}

func (t wsTransport) write(ctx context.Context, frame []byte) error {
	return t.ws.Write(ctx, websocket.MessageText, frame)
}

func (t wsTransport) close(status websocket.StatusCode, reason string) error {
	return t.ws.Close(status, reason)
}

func (t wsTransport) closeNow() error { return t.ws.CloseNow() }
