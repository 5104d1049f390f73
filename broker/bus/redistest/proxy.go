package redistest

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a Redis server. It can
// black-hole connections: their bytes are silently dropped in both
// directions while both TCP connections stay open, which is what a dead
// NAT entry or a half-open connection looks like to a client. A close on
// either side is still passed on, so a client that gives up a black-holed
// connection also ends it at the server.
//
// It stands in for the network, not for Redis: the server behind it is real.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn

	mu         sync.Mutex
	subscriber bool // the client sent a (S)SUBSCRIBE command
	blackholed bool
}

// StartProxy starts a proxy to target (host:port) and closes it, and every
// connection through it, in t.Cleanup.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: listening for the proxy: %v", err)
	}
	p := &Proxy{t: t, ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns the proxy's redis:// URL.
func (p *Proxy) URL() string { return "redis://" + p.Addr() }

// BlackholeSubscribers black-holes every open connection on which the client
// has sent a SUBSCRIBE or SSUBSCRIBE command (recognised by the bytes
// "subscribe" in any case, so a published payload containing that word
// marks its connection too) and returns how many it black-holed. New
// connections are proxied normally.
func (p *Proxy) BlackholeSubscribers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		c.mu.Lock()
		if c.subscriber && !c.blackholed {
			c.blackholed = true
			n++
		}
		c.mu.Unlock()
	}
	return n
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, client, server, true)
		go p.pipe(c, server, client, false)
	}
}

var subscribeWord = []byte("subscribe")

func (p *Proxy) pipe(c *proxyConn, src, dst net.Conn, fromClient bool) {
	defer p.wg.Done()
	defer func() {
		c.close()
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			c.mu.Lock()
			if fromClient && bytes.Contains(bytes.ToLower(buf[:n]), subscribeWord) {
				c.subscriber = true
			}
			drop := c.blackholed
			c.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *proxyConn) close() {
	_ = c.client.Close()
	_ = c.server.Close()
}

func (p *Proxy) close() {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		p.t.Errorf("redistest: closing proxy: %v", err)
	}
}
