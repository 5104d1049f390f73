package caller

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/tetherdev/tether/internal/rawnet"
	"github.com/tetherdev/tether/tlsclient"
)

// Transport is an http.RoundTripper for a process that calls one broker
// over HTTP or HTTPS, one call at a time per connection (tether mcp, tether
// call): each request is written, and its answer read, on the goroutine
// that makes it, over a keep-alive connection of its own pool.
//
// It is written by hand because net/http's Transport hands every request to
// two goroutines of the connection (its write loop and its read loop) and
// the answer back: three goroutine wake-ups per call where this has one.
// tether mcp relays every tool call through here; on a 2-core machine the
// handoffs cost about 0.1 ms a call (e2e/bench BenchmarkMCPToolCall, the
// stdio way, p50 over the call API: +0.49 and +0.51 ms with net/http's
// Transport, +0.39 and +0.41 ms with this one, alternating runs). The HTTP
// itself is the standard library's (Request.Write, http.ReadResponse); what
// this adds is the connection pool.
//
// Requests it does not serve go to Fallback (http.DefaultTransport when
// nil): another scheme than http and https, or a URL the proxy settings (Proxy) send
// through a proxy. A connection is used again only after its answer
// was read to the end and neither side asked to close it, and not after it
// sat idle for IdleTimeout; a request that fails is not sent again (a
// call may have run).
//
// Concurrency: RoundTrip and CloseIdleConnections may be called from any
// goroutine.
type Transport struct {
	// Fallback serves the requests this transport does not.
	Fallback http.RoundTripper
	// MaxIdle bounds the idle connections kept (default 8).
	MaxIdle int
	// IdleTimeout is how long an idle connection is kept (default 30 s).
	IdleTimeout time.Duration
	// Dial opens connections (default a net.Dialer with a 10 s timeout,
	// its connections read and written through internal/rawnet).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS runs the handshake of https connections over what Dial opened
	// (default: the system's roots, tlsclient.New(tlsclient.Options{})).
	TLS *tlsclient.Dialer
	// Proxy says which requests go through a proxy, as http.Transport's
	// (default http.ProxyFromEnvironment); those go to Fallback.
	Proxy func(*http.Request) (*url.URL, error)

	mu   sync.Mutex
	idle map[string][]*leanConn // host:port -> idle connections, newest last
}

var _ http.RoundTripper = (*Transport)(nil)

// leanConn is a pooled connection and the reader of its answers.
type leanConn struct {
	net.Conn
	br    *bufio.Reader
	since time.Time // idle since
}

// aLongTimeAgo is a deadline that fails every blocked read and write.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.serves(req) {
		fb := t.Fallback
		if fb == nil {
			fb = http.DefaultTransport
		}
		return fb.RoundTrip(req)
	}
	ctx := req.Context()
	addr := canonicalAddr(req)
	c, err := t.get(ctx, req.URL.Scheme, addr)
	if err != nil {
		return nil, err
	}
	// The request's context ends any read or write on c at once; c is then
	// closed, not pooled.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := req.Write(c); err != nil {
		return fail(err)
	}
	res, err := http.ReadResponse(c.br, req)
	if err != nil {
		return fail(err)
	}
	res.Body = &leanBody{ReadCloser: res.Body, done: func(clean bool) {
		// stop is false once the context's cut ran (or runs).
		if !stop() || !clean || res.Close || req.Close {
			_ = c.Close()
			return
		}
		t.put(req.URL.Scheme+"://"+addr, c)
	}}
	return res, nil
}

// serves reports whether req is for this transport: HTTP or HTTPS, no
// proxy.
func (t *Transport) serves(req *http.Request) bool {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return false
	}
	proxyFor := t.Proxy
	if proxyFor == nil {
		proxyFor = http.ProxyFromEnvironment
	}
	proxy, err := proxyFor(req)
	return err == nil && proxy == nil
}

// canonicalAddr is req's host:port.
func canonicalAddr(req *http.Request) string {
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(host, port)
}

// get returns an idle connection to addr for scheme (http or https) or
// dials one.
func (t *Transport) get(ctx context.Context, scheme, addr string) (*leanConn, error) {
	now := time.Now()
	key := scheme + "://" + addr
	t.mu.Lock()
	for list := t.idle[key]; len(list) > 0; list = t.idle[key] {
		c := list[len(list)-1]
		t.idle[key] = list[:len(list)-1]
		if now.Sub(c.since) < t.idleTimeout() {
			t.mu.Unlock()
			return c, nil
		}
		_ = c.Close() // stale: the server or a proxy may have dropped it
	}
	t.mu.Unlock()
	dial := t.Dial
	if dial == nil {
		dial = rawnet.Dial(&net.Dialer{Timeout: 10 * time.Second}) // no sysmon wake per read (internal/rawnet)
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if scheme == "https" {
		td := t.TLS
		if td == nil {
			if td, err = systemTLS(); err != nil {
				_ = conn.Close()
				return nil, err
			}
		}
		tc, err := td.Client(ctx, conn, addr)
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		conn = tc
	}
	return &leanConn{Conn: conn, br: bufio.NewReaderSize(conn, 4096)}, nil
}

// systemTLS is Transport.TLS's default: the system's roots.
var systemTLS = sync.OnceValues(func() (*tlsclient.Dialer, error) { return tlsclient.New(tlsclient.Options{}) })

// put keeps c for the next request to key (scheme://host:port), or closes
// it when the pool is full.
func (t *Transport) put(key string, c *leanConn) {
	_ = c.SetDeadline(time.Time{})
	c.since = time.Now()
	maxIdle := t.MaxIdle
	if maxIdle <= 0 {
		maxIdle = 8
	}
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*leanConn)
	}
	if len(t.idle[key]) < maxIdle {
		t.idle[key] = append(t.idle[key], c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

func (t *Transport) idleTimeout() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return 30 * time.Second
}

// CloseIdleConnections closes the idle connections, as http.Transport's
// does (http.Client.CloseIdleConnections calls it).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			_ = c.Close()
		}
	}
	if fb, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		fb.CloseIdleConnections()
	}
}

// leanBody is an answer's body: done runs once, with clean set when the
// body was read to its end without an error.
type leanBody struct {
	io.ReadCloser
	done   func(clean bool)
	once   sync.Once
	atEOF  bool
	failed bool
}

func (b *leanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		b.atEOF = true
		b.finish()
	case err != nil:
		b.failed = true
		b.finish()
	}
	return n, err
}

func (b *leanBody) Close() error {
	err := b.ReadCloser.Close()
	b.finish()
	return err
}

func (b *leanBody) finish() {
	b.once.Do(func() { b.done(b.atEOF && !b.failed) })
}
