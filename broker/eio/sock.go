package eio

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The TCP connection under a client's WebSocket. coder/websocket reads and
// writes through the bufio.Reader and bufio.Writer that the HTTP server's
// Hijack returns; net/http's are 4 KB each, which an idle connection would
// hold for its whole life. socketHijacker gives coder/websocket small ones
// over a sock instead, which
//
//   - holds a read buffer only while bytes wait in it: it waits for the
//     socket to become readable without one (syscall.RawConn), reads into a
//     pooled buffer and gives it back once drained;
//   - collects what is written while corked in one pooled buffer and writes
//     it with one syscall at uncork, so a batch of queued frames costs one
//     write; a write that would block waits at most the write timeout;
//   - parks when its client has been quiet for sockLinger: the reading
//     goroutine ends and the poller (poller_linux.go) wakes the socket when
//     the client sends again, so an idle connection has no goroutine.
//
// This is hand-written because coder/websocket has no option for it: it
// takes the bufio pair as net/http's Hijack hands it over. What it earns,
// against coder/websocket over net/http's buffers (TETHER_TUNING=no-sock,
// which parks nothing either; make bench-peers, 2026-12-04, one instance,
// medians of three rounds' ratios): without it the broker made 0.82x
// (c=1) and 0.83x (c=64) the calls per CPU-second, at 1.05x and 1.25x the
// p99, and held 1.25x the memory and a goroutine per idle connection.

// Buffer sizes. The bufio pair only has to hold a frame header; the pooled
// buffers carry the bytes.
const (
	sockBufioSize   = 64
	sockReadBufSize = 4 << 10
	sockMaxKeptBuf  = 64 << 10 // larger write buffers are not pooled
)

// sockLinger is how long a client is quiet before its socket parks: between
// half of it and all of it. A connection that is called more often than
// that keeps its goroutine and pays no parking (an epoll_ctl and a new
// goroutine); one that is not holds no stack.
const sockLinger = time.Second

// A sock's read side is owned by one goroutine at a time: a reader
// (sockReading), or nobody while parked; sockClosing ends parking.
const (
	sockReading int32 = iota
	sockParked
	sockClosing
)

var sockBufs = sync.Pool{New: func() any { b := make([]byte, 0, sockReadBufSize); return &b }}

func getSockBuf() *[]byte { return sockBufs.Get().(*[]byte) }

func putSockBuf(b *[]byte) {
	if cap(*b) > sockMaxKeptBuf {
		return
	}
	*b = (*b)[:0]
	sockBufs.Put(b)
}

// socketHijacker is the http.ResponseWriter handed to websocket.Accept: its
// Hijack wraps the connection in a sock. A connection that offers no
// syscall.RawConn (not a TCP socket) keeps net/http's buffers.
type socketHijacker struct {
	http.ResponseWriter
	writeTimeout time.Duration
	poller       *poller // nil: the sock never parks
	sock         *sock   // set by Hijack
	// plain is set by Hijack instead of sock for a connection that offers
	// no raw access (a TLS connection).
	plain *plainConn
}

// Hijack implements http.Hijacker.
func (h *socketHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		h.plain = &plainConn{nc: nc}
		return nc, brw, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		h.plain = &plainConn{nc: nc}
		return nc, brw, nil
	}
	s := newSock(nc, raw, h.writeTimeout, h.poller)
	// net/http's writer is flushed (the 101 response went out); its reader
	// may hold bytes the client sent right after the upgrade request.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		s.rbuf = getSockBuf()
		*s.rbuf = append(*s.rbuf, b...)
	}
	h.sock = s
	return s, bufio.NewReadWriter(s.br, bufio.NewWriterSize(s, sockBufioSize)), nil
}

// newSock wraps nc, whose raw connection is raw; poller nil: it never parks.
func newSock(nc net.Conn, raw syscall.RawConn, writeTimeout time.Duration, p *poller) *sock {
	s := &sock{Conn: nc, raw: raw, writeTimeout: writeTimeout, poller: p}
	s.readFn, s.writeFn = s.readOnce, s.writeOnce
	s.br = bufio.NewReaderSize(s, sockBufioSize)
	return s
}

// sock is a client's TCP connection as coder/websocket sees it.
//
// Concurrency: the read side (Read, quiet, park) belongs to the goroutine
// that owns it by state: a reader, handed over through the poller; rmu
// still guards the read buffer, for coder/websocket's close handshake,
// which reads from the closing goroutine. Write, cork and uncork may be
// called from any goroutine; wmu orders them and is held across a socket
// write, which is bounded by writeTimeout.
type sock struct {
	net.Conn
	raw          syscall.RawConn
	writeTimeout time.Duration
	br           *bufio.Reader // coder/websocket's reader over this sock
	brmu         sync.Mutex    // orders buffered's look at br before closing

	rmu       sync.Mutex
	rbuf      *[]byte // unread bytes from the socket; nil when there are none
	rpos      int
	rdeadline time.Time // the read deadline quiet set; zero when none
	// readFn (readOnce) is the callback of every raw read, made once: a
	// closure per read would be an allocation each. Its arguments and
	// results are these fields, under rmu.
	readFn func(fd uintptr) bool
	rdInto []byte  // read into this; nil: into rdBuf, a pooled buffer
	rdBuf  *[]byte // the pooled buffer being read into
	rdN    int
	rdErr  error
	// msg holds the message just read (readMessage), until the next; the
	// reader's, given back when the socket parks.
	msg *[]byte

	state atomic.Int32 // sockReading, sockParked, sockClosing
	// poller wakes the socket when parked; nil when it cannot park. The
	// fields below are the read side's.
	poller    *poller
	noPark    bool   // the poller could not watch it: the sock reads on
	pollID    uint64 // its id with the poller (guarded by the poller's mu)
	pollAdded bool   // registered with the epoll instance once
	resume    func() // called (on the poller's goroutine) when a parked sock becomes readable

	wmu    sync.Mutex
	corked int
	wbuf   *[]byte // bytes written while corked; nil when there are none
	werr   error   // a failed write: the stream is broken, every later write fails
	// writeFn (writeOnce) is the callback of every raw write, made once,
	// with these fields, under wmu.
	writeFn func(fd uintptr) bool
	wrP     []byte
	wrN     int
	wrErr   error
}

// Read implements io.Reader for coder/websocket's bufio.Reader.
func (s *sock) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.rbuf == nil {
		if len(p) >= sockReadBufSize {
			// A large read goes straight to the caller.
			n, err := s.readInto(p)
			if s.pastQuietDeadline(err) {
				n, err = s.readInto(p)
			}
			return n, err
		}
		b, err := s.fill()
		if s.pastQuietDeadline(err) {
			b, err = s.fill()
		}
		if err != nil {
			return 0, err
		}
		s.rbuf, s.rpos = b, 0
	}
	n := copy(p, (*s.rbuf)[s.rpos:])
	s.rpos += n
	if s.rpos == len(*s.rbuf) {
		putSockBuf(s.rbuf)
		s.rbuf = nil
	}
	return n, nil
}

// readInto reads into p, waiting until the socket has something. rmu is
// held.
func (s *sock) readInto(p []byte) (int, error) {
	s.rdInto, s.rdN = p, 0
	err := s.raw.Read(s.readFn)
	s.rdInto = nil
	n, rerr := s.rdN, s.rdErr
	s.rdErr = nil
	if err == nil {
		err = s.readError(n, rerr)
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// fill waits until the socket is readable, holding no buffer meanwhile,
// and returns what one read brought, in a pooled buffer. rmu is held.
func (s *sock) fill() (*[]byte, error) {
	s.rdN = 0
	err := s.raw.Read(s.readFn)
	b, n, rerr := s.rdBuf, s.rdN, s.rdErr
	s.rdBuf, s.rdErr = nil, nil
	if err == nil {
		err = s.readError(n, rerr)
	}
	if err != nil {
		if b != nil {
			putSockBuf(b)
		}
		return nil, err
	}
	*b = (*b)[:n]
	return b, nil
}

// readOnce is one read(2) of a raw read: into rdInto, or into a pooled
// buffer (rdBuf) that it gives back if the socket has nothing yet; false
// then, to wait for readability.
func (s *sock) readOnce(fd uintptr) bool {
	dst := s.rdInto
	if dst == nil {
		if s.rdBuf == nil {
			s.rdBuf = getSockBuf()
		}
		dst = (*s.rdBuf)[:cap(*s.rdBuf)]
	}
	s.rdN, s.rdErr = readFD(fd, dst)
	if s.rdErr == errWouldBlock {
		if s.rdBuf != nil {
			putSockBuf(s.rdBuf)
			s.rdBuf = nil
		}
		return false
	}
	return true
}

// readError turns what read(2) returned into a Read's error.
func (s *sock) readError(n int, rerr error) error {
	switch {
	case rerr != nil:
		return &net.OpError{Op: "read", Net: "tcp", Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n == 0:
		return io.EOF
	}
	return nil
}

// readMessage reads the rest of a message from r into the socket's message
// buffer and returns it; it is valid until the next readMessage.
func (s *sock) readMessage(r io.Reader) ([]byte, error) {
	if s.msg == nil {
		s.msg = getSockBuf()
	}
	return readMessageInto(s.msg, r)
}

// readMessageInto reads a message from r into *buf, growing it as needed,
// and returns it; it is valid until *buf is read into again.
func readMessageInto(buf *[]byte, r io.Reader) ([]byte, error) {
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			*buf = b
			if err == io.EOF {
				return b, nil
			}
			return nil, err
		}
	}
}

// quiet waits, at a message boundary, until the client sends something or
// has been quiet for about sockLinger, and reports the latter. The
// deadline is set anew only when half of it is gone, not for every
// message.
func (s *sock) quiet() bool {
	if s.poller == nil || s.noPark || s.buffered() {
		return false
	}
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.rbuf != nil {
		return false
	}
	now := time.Now()
	if s.rdeadline.Sub(now) < sockLinger/2 {
		s.rdeadline = now.Add(sockLinger)
		_ = s.SetReadDeadline(s.rdeadline)
	}
	b, err := s.fill()
	if err == nil {
		s.rbuf, s.rpos = b, 0
		return false
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.clearDeadlineLocked()
		return true
	}
	return false // the read that follows reports the error
}

// buffered reports whether coder/websocket's reader holds bytes; it
// answers true once the connection is closing, when the close handshake
// may be using that reader on another goroutine.
func (s *sock) buffered() bool {
	s.brmu.Lock()
	defer s.brmu.Unlock()
	return s.state.Load() == sockClosing || s.br.Buffered() > 0
}

// pastQuietDeadline reports whether err is quiet's deadline passing in the
// middle of a message, and clears it then: the client is not quiet, and the
// read is tried again for the rest, however long it takes to come. rmu is
// held.
func (s *sock) pastQuietDeadline(err error) bool {
	if !errors.Is(err, os.ErrDeadlineExceeded) || s.rdeadline.IsZero() {
		return false
	}
	s.clearDeadlineLocked()
	return true
}

func (s *sock) clearDeadlineLocked() {
	s.rdeadline = time.Time{}
	_ = s.SetReadDeadline(time.Time{})
}

// park hands the quiet socket to the poller; the calling reader must end
// without touching the read side if it succeeds. It fails once the
// connection is closing, or when the poller cannot watch the socket (then
// it never parks again).
func (s *sock) park() bool {
	if s.poller == nil || s.noPark {
		return false
	}
	if s.msg != nil {
		putSockBuf(s.msg) // before parking: then the read side is not ours
		s.msg = nil
	}
	if !s.state.CompareAndSwap(sockReading, sockParked) {
		return false
	}
	if err := s.poller.park(s); err != nil {
		s.noPark = true
		s.state.CompareAndSwap(sockParked, sockReading)
		return false
	}
	return true
}

// wake is the poller's: a parked socket became readable.
func (s *sock) wake() {
	if s.state.CompareAndSwap(sockParked, sockReading) {
		s.resume()
	}
}

// closing ends parking: a parked socket is not woken any more, and a
// reader's park fails. The goroutine closing the connection reads from
// then on (coder/websocket's close handshake) if no reader does.
func (s *sock) closing() {
	s.brmu.Lock()
	s.state.Store(sockClosing) // buffered touches br no more
	s.brmu.Unlock()
	if p := s.poller; p != nil {
		p.forget(s)
	}
}

// writeOnce is one write(2) of a raw write, of wrP; it never waits (what
// the socket did not take is written by writeLocked, with a deadline).
func (s *sock) writeOnce(fd uintptr) bool {
	s.wrN, s.wrErr = writeFD(fd, s.wrP)
	return true
}

// cork makes writes collect until the matching uncork.
func (s *sock) cork() {
	s.wmu.Lock()
	s.corked++
	s.wmu.Unlock()
}

// uncork ends a cork; the last one writes what was collected.
func (s *sock) uncork() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.corked--
	if s.corked > 0 || s.wbuf == nil {
		return s.werr
	}
	b := s.wbuf
	s.wbuf = nil
	err := s.writeLocked(*b)
	putSockBuf(b)
	return err
}

// Write implements io.Writer for coder/websocket's bufio.Writer. Corked,
// it collects; otherwise (coder/websocket's own control frames) it writes
// through.
func (s *sock) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.werr != nil {
		return 0, s.werr
	}
	if s.corked > 0 {
		if s.wbuf == nil {
			s.wbuf = getSockBuf()
		}
		*s.wbuf = append(*s.wbuf, p...)
		return len(p), nil
	}
	if err := s.writeLocked(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeLocked writes all of p: one attempt that does not wait, then, for
// what the socket did not take, a write bounded by writeTimeout. wmu is
// held. A failure sticks.
func (s *sock) writeLocked(p []byte) error {
	if s.werr != nil {
		return s.werr
	}
	s.wrP, s.wrN = p, 0
	err := s.raw.Write(s.writeFn)
	n, werr := s.wrN, s.wrErr
	s.wrP, s.wrErr = nil, nil
	if err == nil && werr != nil {
		err = &net.OpError{Op: "write", Net: "tcp", Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: os.NewSyscallError("write", werr)}
	}
	if err == nil && n < len(p) {
		// The client reads slower than we write: wait, but not forever.
		_ = s.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		_, err = s.Conn.Write(p[n:])
		_ = s.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		s.werr = err
	}
	return err
}
