package eio

import (
	"context"
	"net"
	"sync"
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
	s *sock
	// plain is the connection under ws when it offers no raw access (a
	// TLS connection: crypto/tls reads and writes it) and the sock is on;
	// nil with the sock off (TETHER_TUNING), where contexts bound reads
	// and writes as coder/websocket does by itself.
	plain   *plainConn
	timeout time.Duration
}

// plainConn is what a WebSocket needs of its connection when the sock
// cannot serve it (over TLS): its writes are bounded by the connection's
// write deadline, not by a context, which costs coder/websocket an
// AfterFunc, a timer and a goroutine-safe cancel per frame (with the read
// side's, about 6% of the broker's CPU over TLS in a profile at c=64, and
// io.ReadAll's allocations 3% more); messages are read into a buffer kept
// between reads. A read ends when the connection closes, as a sock's does
// (Session.Close closes it). It is part of the sock piece
// (TETHER_TUNING=no-sock turns both off).
//
// What it earns (make bench-peers, tls topology, 2026-12-04, against the
// build without it in the same run, three rounds, medians of the
// per-round ratios): tether's broker CPU per call over TLS went from
// 1.36x to 1.13x its plaintext one at c=1 and from 1.32x to 1.25x at
// c=64; plaintext unchanged (1.01x, 1.00x).
//
// Concurrency: the reader owns msg; wmu orders writes, whose deadline is
// the connection's.
type plainConn struct {
	nc  net.Conn
	wmu sync.Mutex
	msg []byte
}

func (p *plainConn) write(ws *websocket.Conn, timeout time.Duration, frames [][]byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.nc.SetWriteDeadline(time.Now().Add(timeout))
	defer func() { _ = p.nc.SetWriteDeadline(time.Time{}) }()
	for _, f := range frames {
		if err := ws.Write(context.Background(), websocket.MessageText, f); err != nil {
			return err
		}
	}
	return nil
}

func (t wsTransport) read(ctx context.Context) (bool, []byte, error) {
	if t.plain != nil {
		typ, r, err := t.ws.Reader(context.Background())
		if err != nil {
			return false, nil, err
		}
		if cap(t.plain.msg) > sockMaxKeptBuf || t.plain.msg == nil {
			t.plain.msg = make([]byte, 0, 1<<10) // a large message's buffer is not kept
		}
		data, err := readMessageInto(&t.plain.msg, r)
		return typ == websocket.MessageBinary, data, err
	}
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
	if t.plain != nil {
		return t.plain.write(t.ws, t.timeout, frames)
	}
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
