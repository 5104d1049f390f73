package eio

import (
	"context"
	"time"

	"github.com/coder/websocket"
)

// transport carries Engine.IO packets between the broker and one client:
// a WebSocket, or HTTP long-polling that may upgrade to a WebSocket. A
// connection's read loop is the only reader; writes may come from any
// goroutine and never interleave.
type transport interface {
	// read returns the client's next packet: a text Engine.IO packet, or
	// a binary attachment (binary true). data is valid until the next
	// read: what outlives it is copied.
	read(ctx context.Context) (binary bool, data []byte, err error)
	// write sends text Engine.IO packets, in order, each its own message,
	// in as few writes to the socket as it can; it gives up after the
	// broker's write timeout.
	write(frames ...[]byte) error
	// close ends the transport politely (a WebSocket closing handshake
	// with status and reason); closeNow ends it at once.
	close(status websocket.StatusCode, reason string) error
	closeNow() error
}

// parker is a transport that can wait for its client without a goroutine
// (a WebSocket over a sock, sock.go). Only the reader calls it.
type parker interface {
	// quiet waits until the client sends or has been quiet for a while,
	// and reports the latter.
	quiet() bool
	// park hands the waiting to the poller, which resumes the connection
	// on a new goroutine when the client sends; the reader then ends.
	// false: keep reading.
	park() bool
}

// wsTransport is a client connected over WebSocket from the start.
type wsTransport struct {
	ws *websocket.Conn
	// s is the socket under ws (sock.go); nil when the connection
	// offered no raw access and net/http's buffers serve.
	s       *sock
	timeout time.Duration
}

func (t wsTransport) read(ctx context.Context) (bool, []byte, error) {
	if t.s == nil {
		typ, data, err := t.ws.Read(ctx)
		return typ == websocket.MessageBinary, data, err
	}
	// Closing the socket ends a read; a context with a deadline or a
	// cancel would cost coder/websocket an AfterFunc per frame. The
	// message goes into the socket's buffer, not a new one.
	typ, r, err := t.ws.Reader(context.Background())
	if err != nil {
		return false, nil, err
	}
	data, err := t.s.readMessage(r)
	return typ == websocket.MessageBinary, data, err
}

func (t wsTransport) write(frames ...[]byte) error {
	if t.s == nil {
		ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
		defer cancel()
		for _, f := range frames {
			if err := t.ws.Write(ctx, websocket.MessageText, f); err != nil {
				return err
			}
		}
		return nil
	}
	// Corked, coder/websocket's writes only copy into the socket's
	// buffer and cannot block on the client, so they need no deadline of
	// their own; uncork writes them all at once, bounded by the timeout.
	t.s.cork()
	var err error
	for _, f := range frames {
		if err = t.ws.Write(context.Background(), websocket.MessageText, f); err != nil {
			break
		}
	}
	if uerr := t.s.uncork(); err == nil {
		err = uerr
	}
	return err
}

func (t wsTransport) quiet() bool { return t.s != nil && t.s.quiet() }

func (t wsTransport) park() bool { return t.s != nil && t.s.park() }

func (t wsTransport) close(status websocket.StatusCode, reason string) error {
	if t.s != nil {
		t.s.closing()
	}
	return t.ws.Close(status, reason)
}

func (t wsTransport) closeNow() error {
	if t.s != nil {
		t.s.closing()
	}
	return t.ws.CloseNow()
}
