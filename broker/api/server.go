package api

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherdev/tether/internal/rawnet"
	"github.com/tetherdev/tether/internal/tuning"
	"github.com/tetherdev/tether/internal/workers"
)

// Server serves an API on a listener: the call API's POST
// /api/v1/workspaces/{id}/calls on connections the Server reads and writes
// itself (callConn), everything else through net/http.
//
// Why not net/http for calls too: a caller's request spends its life
// waiting for an answer that another goroutine (the workspace
// connection's reader) receives. Through net/http that is three goroutines
// per call: the connection's, which waits on a channel for the answer and
// then writes it; the background reader net/http starts for every request
// to notice a client going away (a goroutine, a read that finds nothing, a
// wake-up and two deadline changes when the handler returns); and the
// reader that receives the answer. A callConn has one goroutine, which
// reads the requests and, waiting for the next one, notices the client
// going; the answer is written by whichever goroutine ends the call (it
// ends as soon as the call table hands it out: callConn is the call's
// waiter). No library does this: every HTTP server has the handler return
// the answer.
//
// What it earns, against net/http serving every request
// (TETHER_TUNING=no-callserver; make bench-peers, 2026-12-04, one
// instance, medians of three rounds' ratios): without it the broker made
// 0.65x (c=1) and 0.57x (c=64) the calls per CPU-second, at 1.10x and
// 1.56x the p99.
//
// Only requests that parseCallHead serves take this path. Anything else on
// the connection (a WebSocket upgrade, another endpoint, a chunked body, a
// malformed head) goes to net/http from its first byte, with the
// connection: net/http serves it from then on.
//
// Concurrency: Serve runs the accept loop; Shutdown may be called from any
// goroutine.
type Server struct {
	a  *API
	hs *http.Server
	// tlsConfig is hs.TLSConfig as NewServer found it; nil: plaintext.
	tlsConfig *tls.Config
	// declined feeds net/http's Serve the connections it serves.
	declined *connQueue

	mu      sync.Mutex
	ln      net.Listener
	conns   map[*callConn]struct{}
	closing bool
	conned  sync.WaitGroup // callConn goroutines
	httpEnd chan struct{}  // closed when net/http's Serve returned
	served  atomic.Int64   // requests the call server answered
	// workers run what a request waits for (the bus, the store) off its
	// connection's goroutine, which watches for the client going.
	workers workers.Pool
}

// NewServer returns a Server for a; hs carries net/http's settings (its
// Handler is a.Handler() when nil). ReadHeaderTimeout bounds a call's head
// as well (10s when zero).
//
// With hs.TLSConfig set the Server serves TLS (see accepting): a copy of it
// is taken here, and HTTP/2 is not offered (hs.TLSNextProto is set empty
// when nil): net/http's Serve would otherwise add "h2" to the config's
// NextProtos, while the call server speaks HTTP/1.1 only.
func NewServer(a *API, hs *http.Server) *Server {
	if hs.Handler == nil {
		hs.Handler = a.Handler()
	}
	if hs.ReadHeaderTimeout <= 0 {
		hs.ReadHeaderTimeout = 10 * time.Second
	}
	if hs.TLSNextProto == nil {
		hs.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	s := &Server{a: a, hs: hs, conns: make(map[*callConn]struct{}), httpEnd: make(chan struct{})}
	if hs.TLSConfig != nil {
		s.tlsConfig = hs.TLSConfig.Clone()
		a.tls.Store(true)
	}
	return s
}

// Serve accepts connections on ln until Shutdown, and returns
// http.ErrServerClosed then (or the listener's error). Connections are
// made by accepting. With the call server
// off (TETHER_TUNING=no-callserver) net/http serves every connection.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing || s.ln != nil {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.ln = ln
	s.declined = newConnQueue(ln.Addr())
	s.mu.Unlock()
	if !tuning.On(tuning.CallServer) {
		defer close(s.httpEnd)
		return s.hs.Serve(s.accepting(ln)) // net/http runs TLS handshakes itself
	}
	go func() {
		defer close(s.httpEnd)
		_ = s.hs.Serve(s.declined)
	}()
	ln = s.accepting(ln)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Out of descriptors, say: as net/http, wait and retry.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			s.declined.Close()
			return err
		}
		backoff = 0
		c := newCallConn(s, nc)
		if !s.track(c) {
			_ = nc.Close()
			continue
		}
		go func() { // waited for by Shutdown (conned)
			defer s.untrack(c)
			c.serve()
		}()
	}
}

// accepting is the one place where the broker's listener and its
// connections are made: every connection, a call's, a WebSocket's or a
// long-polling request's, is accepted here. They are read and written with
// rawnet (system calls the runtime is not told of); with a TLS config,
// TLS runs over those same raw connections (a tls.Listener over the
// rawnet one), so the TLS records are read and written as plaintext is.
// Above it, a *tls.Conn is no *net.TCPConn and offers no syscall.Conn:
// rawnet.TryWrite reports it is not one of its own (the call server then
// writes as usual) and eio's sock is not used (the WebSocket keeps
// net/http's buffers over the TLS connection).
//
// The handshake is not run here, where it would hold up the accept loop,
// but by the connection's goroutine (handshake), bounded by
// ReadHeaderTimeout.
func (s *Server) accepting(ln net.Listener) net.Listener {
	ln = rawnet.Listener(ln)
	if s.tlsConfig != nil {
		ln = tls.NewListener(ln, s.tlsConfig)
	}
	return ln
}

// handshake completes nc's TLS handshake, if it is a TLS connection,
// within ReadHeaderTimeout; false when it failed. It runs on the
// connection's goroutine (callConn.serve) before the first request is
// read: a client that connects and says nothing holds only its
// own goroutine, and not for longer than a request head could.
func (s *Server) handshake(nc net.Conn) bool {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.hs.ReadHeaderTimeout)
	defer cancel()
	return tc.HandshakeContext(ctx) == nil
}

// isTemporary reports an accept error net/http would retry (EMFILE and
// such report Temporary).
func isTemporary(err error) bool {
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}

// Shutdown stops accepting, closes idle connections and those that finish
// their answer, shuts net/http down (http.Server.Shutdown) and waits, up
// to ctx, for every connection to end. Shut the broker down first: its
// Shutdown answers the calls in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	ln := s.ln
	conns := make([]*callConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for _, c := range conns {
		c.shutdown()
	}
	err := s.hs.Shutdown(ctx)
	done := make(chan struct{})
	go func() {
		s.conned.Wait() // the connections waited for their requests' workers
		s.workers.Close()
		s.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if ln != nil {
		select {
		case <-s.httpEnd:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// Served counts the requests the call server answered itself; the rest
// went to net/http.
func (s *Server) Served() int64 { return s.served.Load() }

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Server) track(c *callConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.conned.Add(1)
	return true
}

func (s *Server) untrack(c *callConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.conned.Done()
}

// decline hands nc to net/http with the bytes already read from it.
func (s *Server) decline(nc net.Conn, read []byte) {
	if !s.declined.push(&prefixConn{Conn: nc, prefix: read}) {
		_ = nc.Close()
	}
}

// connQueue is the listener net/http serves: the connections the call
// server declined.
type connQueue struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

// push hands c to net/http; false once it no longer accepts.
func (q *connQueue) push(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}
