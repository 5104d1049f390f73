package api

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/internal/rawnet"
	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// callConnBufSize is a call connection's first read buffer; it grows for a
// larger request.
const callConnBufSize = 4 << 10

// callConn is one HTTP/1.1 connection of the call server (Server): one
// request at a time is answered, in order; a client may send the next
// before the answer (pipelining), and it is read once the answer is out.
//
// Concurrency: the connection's goroutine (serve) owns the read side and
// the request being read. A request's answer is written once, by whichever
// goroutine has it: serve itself for a refusal, the goroutine that ends a
// call on a local holder (callConn is the call's waiter), or the server's worker that
// waits for the bus or the store (onWorker). The answer's state (start,
// hdrs, wbuf) belongs to that request until done; mu guards the rest.
type callConn struct {
	s  *Server
	nc net.Conn

	// Read side (serve's).
	buf      []byte
	r, w     int       // unread bytes are buf[r:w]
	deadline time.Time // the read deadline set for a partial head; zero when none

	// The request being answered, set by serve before it dispatches.
	start      time.Time
	span       trace.Span // the call's trace (callSpan); nil when none
	closeAfter bool       // the client asked Connection: close
	hdrs       []byte     // header lines added by Header
	note       *callNote  // the request's audit line (audit.go); nil when none
	wbuf       []byte

	mu      sync.Mutex
	busy    bool          // a request is being answered
	waiting bool          // serve waits for busy to end
	idle    chan struct{} // serve's wake-up when busy ends (buffered 1)
	closing bool          // close when busy ends; take no new request
	gone    bool          // the client went while busy
	// What ends the request in flight when its client goes: the local
	// holder of its call and the call's id, or the context of a request
	// that waits on its own goroutine.
	holder Holder
	cid    string
	cancel context.CancelFunc
}

func newCallConn(s *Server, nc net.Conn) *callConn {
	return &callConn{s: s, nc: nc, buf: getCallBuf(), idle: make(chan struct{}, 1)}
}

// callBufs pools the connections' first read buffers: every connection
// starts on the call server, a WebSocket's too, which leaves it after its
// upgrade request.
var callBufs = sync.Pool{New: func() any { return new([callConnBufSize]byte) }}

func getCallBuf() []byte { return callBufs.Get().(*[callConnBufSize]byte)[:] }

// putCallBuf gives b back to the pool if it is a pooled one.
func putCallBuf(b []byte) {
	if cap(b) == callConnBufSize {
		callBufs.Put((*[callConnBufSize]byte)(b[:callConnBufSize]))
	}
}

// serve reads and answers requests until the client goes, a request is
// net/http's (then the connection is), or the server shuts down.
func (c *callConn) serve() {
	closeConn := true
	defer func() {
		c.awaitIdle()
		if closeConn {
			_ = c.nc.Close()
		}
		putCallBuf(c.buf)
		c.buf = nil
	}()
	if !c.s.handshake(c.nc) {
		return
	}
	maxBody := c.s.a.cfg.MaxPayload
	for {
		h, v := parseCallHead(c.buf[c.r:c.w], maxBody)
		switch v {
		case headMore:
			if c.r == c.w {
				c.clearDeadline() // between requests: no bound, as net/http's idle wait
			} else if c.deadline.IsZero() {
				c.deadline = time.Now().Add(c.s.hs.ReadHeaderTimeout)
				_ = c.nc.SetReadDeadline(c.deadline)
			}
			if !c.fill(callConnBufSize) {
				return
			}
			continue
		case headDecline:
			if !c.claim() {
				return
			}
			c.clearDeadline()
			c.done() // nothing of it is this server's
			closeConn = false
			// The bytes read ahead are copied: the buffer goes back to
			// the pool, not along with a WebSocket for its whole life.
			c.s.decline(c.nc, bytes.Clone(c.buf[c.r:c.w]))
			return
		}
		c.clearDeadline()
		if c.w-c.r < h.size+h.contentLength {
			for c.w-c.r < h.size+h.contentLength {
				if !c.fill(h.size + h.contentLength) {
					return
				}
			}
			// fill moved the request (to the start of the buffer, or to a
			// larger one, the old going back to the pool for another
			// connection): h's byte slices point at where it was.
			h, _ = parseCallHead(c.buf[c.r:c.w], maxBody)
		}
		if !c.claim() {
			return
		}
		body := c.buf[c.r+h.size : c.r+h.size+h.contentLength]
		c.start, c.closeAfter, c.hdrs = time.Now(), h.close, c.hdrs[:0]
		c.note = c.s.a.connNote(c, &h)
		c.s.served.Add(1)
		if h.close {
			c.mu.Lock()
			c.closing = true
			c.mu.Unlock()
		}
		switch token := bearerOf(string(h.authorization)); h.route {
		case routeCall:
			c.serveCall(&h, token, bytes.Clone(body))
		case routeStatus:
			c.onWorker(func(ctx context.Context) { c.s.a.callStatus(ctx, c, token, h.id, h.wait, h.waitGiven) })
		case routeCancel:
			c.onWorker(func(ctx context.Context) { c.s.a.callCancel(ctx, c, token, h.id) })
		}
		c.r += h.size + h.contentLength
	}
}

// fill reads more of the request into buf, making room for at least want
// unread bytes. false: the client went (or the connection failed or was
// closed), and a request in flight is cancelled; or a head did not come
// whole within the header timeout, and the connection closes once the
// answer in flight is out.
func (c *callConn) fill(want int) bool {
	if c.r == c.w {
		c.r, c.w = 0, 0
		if len(c.buf) > callConnBufSize && want <= callConnBufSize {
			c.buf = getCallBuf() // a large request's buffer is not kept
		}
	}
	if len(c.buf)-c.r < want || c.w == len(c.buf) {
		size := max(len(c.buf), want)
		if c.w-c.r == size {
			size *= 2
		}
		if size > len(c.buf) {
			buf := make([]byte, size)
			c.w = copy(buf, c.buf[c.r:c.w])
			putCallBuf(c.buf)
			c.buf = buf
		} else {
			c.w = copy(c.buf, c.buf[c.r:c.w])
		}
		c.r = 0
	}
	n, err := c.nc.Read(c.buf[c.w:])
	c.w += n
	switch {
	case err == nil:
		return true
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
	default:
		c.clientGone()
	}
	return false
}

func (c *callConn) clearDeadline() {
	if !c.deadline.IsZero() {
		c.deadline = time.Time{}
		_ = c.nc.SetReadDeadline(time.Time{})
	}
}

// claim waits until the answer in flight is out and makes the connection
// busy with the next request; false when the connection is closing.
func (c *callConn) claim() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.busy {
		c.waiting = true
		c.mu.Unlock()
		<-c.idle
		c.mu.Lock()
	}
	if c.closing || c.gone {
		return false
	}
	c.busy = true
	return true
}

// awaitIdle waits until no answer is in flight.
func (c *callConn) awaitIdle() {
	c.mu.Lock()
	for c.busy {
		c.waiting = true
		c.mu.Unlock()
		<-c.idle
		c.mu.Lock()
	}
	c.mu.Unlock()
}

// done ends the request in flight: its answer is out (or cannot be).
func (c *callConn) done() {
	c.mu.Lock()
	c.busy = false
	cancel := c.cancel
	c.holder, c.cid, c.cancel = nil, "", nil
	wake := c.waiting
	c.waiting = false
	closeNow := c.closing
	c.mu.Unlock()
	if cancel != nil {
		cancel() // the request's context, done with
	}
	if wake {
		c.idle <- struct{}{}
	}
	if closeNow {
		_ = c.nc.Close() // serve's read ends
	}
}

// shutdown closes the connection now when it is idle, else once its
// answer is out.
func (c *callConn) shutdown() {
	c.mu.Lock()
	c.closing = true
	busy := c.busy
	c.mu.Unlock()
	if !busy {
		_ = c.nc.Close()
	}
}

// clientGone ends the request in flight, if any, because its client went:
// the call is cancelled (tool_cancel reaches the workspace client).
func (c *callConn) clientGone() {
	c.mu.Lock()
	holder, cid, cancel := c.holder, c.cid, c.cancel
	c.gone = true
	c.holder, c.cancel = nil, nil
	c.mu.Unlock()
	if holder != nil {
		holder.CancelCall(cid, "caller gone")
	}
	if cancel != nil {
		cancel()
	}
}

// serveCall answers a call's request: refused at once, handed to a
// connection this broker holds (answered by its call table, through
// Answer), or served on one of the server's workers when it waits for the
// bus or the store.
func (c *callConn) serveCall(h *callHead, token string, body []byte) {
	a := c.s.a
	ws := h.id
	if !a.callAuthorized(c, ws, token) {
		return
	}
	var prefer []string
	for _, v := range h.prefer {
		prefer = append(prefer, string(v))
	}
	req, pref, ok := a.acceptCall(c, body, string(h.idempotency), prefer)
	if !ok {
		return
	}
	var span trace.Span
	if h.traceparent != nil || tracing.On() {
		span = a.callSpan(context.Background(), string(h.traceparent), string(h.tracestate), routeCallsPath, ws, syncCall(&req, pref.async))
	}
	c.span = span
	if pref.async || req.Async {
		c.onWorker(func(ctx context.Context) { a.submit(ctx, c, ws, req, pref, span) })
		return
	}
	holder, bus, started := a.begin(ws, &req, c, span)
	switch {
	case !started:
		resp := shuttingDown(req.CorrelationID)
		traceEnd(span, &resp)
		a.finish(c, c.start, resp)
		return
	case bus:
		c.onWorker(func(ctx context.Context) { c.Answer(a.viaBus(ctx, ws, &req, span)) })
		return
	case holder == nil:
		return // answered
	}
	c.mu.Lock()
	mine := c.busy // false: the answer ended the request already
	gone := mine && c.gone
	if mine && !gone {
		c.holder, c.cid = holder, req.CorrelationID
	}
	c.mu.Unlock()
	if gone { // the client went before the holder was known
		holder.CancelCall(req.CorrelationID, "caller gone")
	}
}

// onWorker serves the request in flight with f, which ends with its
// answer, on one of the server's workers: what the request waits for (the
// bus, the store) runs there, while the connection's goroutine watches for
// the client going and waits for the answer (busy). f's context ends when
// the client goes or the answer is out.
func (c *callConn) onWorker(f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.cancel = cancel
	gone := c.gone
	c.mu.Unlock()
	if gone {
		cancel()
	}
	c.s.workers.Go(func() { f(ctx) })
}

// Answer implements caller.Waiter: the one answer of the synchronous call
// in flight. It never blocks.
func (c *callConn) Answer(resp protocol.ToolResponse) {
	a := c.s.a
	a.finish(c, c.start, a.end(resp, c.span))
}

// Header implements writer.
func (c *callConn) Header(key, value string) {
	if bytes.ContainsAny([]byte(key+value), "\r\n") {
		return
	}
	c.hdrs = append(append(append(append(c.hdrs, key...), ": "...), value...), "\r\n"...)
}

// Data implements writer: it writes the answer of the request in
// flight without blocking (what the socket does not take now is written by
// a goroutine that may wait, up to the write timeout) and ends the
// request.
func (c *callConn) Data(code int, contentType string, data []byte) {
	c.s.a.answered(c.note, code, data) // before the write ends the request: the next one's note is set then
	p := append(c.wbuf[:0], "HTTP/1.1 "...)
	p = strconv.AppendInt(p, int64(code), 10)
	p = append(p, ' ')
	p = append(p, http.StatusText(code)...)
	p = append(p, "\r\nContent-Type: "...)
	p = append(p, contentType...)
	p = append(p, "\r\nDate: "...)
	p = append(p, httpDate()...)
	p = append(p, "\r\nContent-Length: "...)
	p = strconv.AppendInt(p, int64(len(data)), 10)
	p = append(p, "\r\n"...)
	p = append(p, c.hdrs...)
	if c.closeAfter {
		p = append(p, "Connection: close\r\n"...)
	}
	p = append(p, "\r\n"...)
	p = append(p, data...)
	c.wbuf = p
	if cap(p) > 64<<10 {
		c.wbuf = nil // a large answer's buffer is not kept
	}
	n, ok, err := rawnet.TryWrite(c.nc, p)
	if ok && (err != nil || n == len(p)) {
		c.wrote(err)
		return
	}
	go func() { // bounded by the write timeout; serve waits for it (busy)
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.a.cfg.WriteTimeout))
		_, err := c.nc.Write(p[n:])
		_ = c.nc.SetWriteDeadline(time.Time{})
		c.wrote(err)
	}()
}

// wrote ends the request whose answer was written (err nil) or could not
// be: then the connection closes.
func (c *callConn) wrote(err error) {
	if err != nil {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
	}
	c.done()
}

// httpDate is the Date header's value now, made once a second.
func httpDate() []byte {
	now := time.Now()
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.sec == sec {
		return d.text
	}
	d := &dateText{sec: sec, text: now.UTC().AppendFormat(nil, http.TimeFormat)}
	lastDate.Store(d)
	return d.text
}

type dateText struct {
	sec  int64
	text []byte
}

var lastDate atomic.Pointer[dateText]

// prefixConn is a connection net/http serves after the call server
// declined it: reads return the bytes the call server had read first.
type prefixConn struct {
	net.Conn
	mu     sync.Mutex
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	p.mu.Lock()
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		p.mu.Unlock()
		return n, nil
	}
	p.mu.Unlock()
	return p.Conn.Read(b)
}

// SyscallConn gives the connection's raw descriptor, for a WebSocket's
// sock (broker/eio/sock.go), once the prefix has been read: a sock reading the
// descriptor itself would skip what is left of it.
func (p *prefixConn) SyscallConn() (syscall.RawConn, error) {
	p.mu.Lock()
	left := len(p.prefix)
	p.mu.Unlock()
	sc, ok := p.Conn.(syscall.Conn)
	if left > 0 || !ok {
		return nil, errPrefixLeft
	}
	return sc.SyscallConn()
}

// CloseWrite half-closes the connection, as net/http does before closing
// one it answered with an error.
func (p *prefixConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

var errPrefixLeft = errors.New("bytes read ahead are left: no raw descriptor")
