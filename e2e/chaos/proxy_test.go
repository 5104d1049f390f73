package chaos

import (
	"errors"
	"net"
	"sync"
	"time"
)

// proxy stands between one bridge and its broker: the bridge dials the
// proxy's fixed address, the proxy dials the broker for each connection and
// copies bytes both ways. It is how the run cuts a bridge's socket mid-call
// and partitions a bridge from its broker without touching either process.
//
// All methods are safe for concurrent use. close ends every goroutine.
type proxy struct {
	ln     net.Listener
	target string
	// onClose is told of every connection that ends (for the
	// connectivity log); it must not block.
	onClose func(at time.Time)

	mu     sync.Mutex
	conns  map[*proxyConn]struct{}
	gate   chan struct{} // closed while traffic flows; open (nil-free, unclosed) while partitioned
	closed bool
	wg     sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn
	once           sync.Once
	p              *proxy
}

// newProxy listens on addr (a fixed loopback address, so a restarted
// bridge dials the same one) and forwards to target.
func newProxy(addr, target string, onClose func(time.Time)) (*proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	gate := make(chan struct{})
	close(gate)
	p := &proxy{ln: ln, target: target, onClose: onClose, conns: map[*proxyConn]struct{}{}, gate: gate}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = client.Close() // the broker is down: the bridge retries
			continue
		}
		c := &proxyConn{client: client, server: server, p: p}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go c.pipe(client, server)
		go c.pipe(server, client)
	}
}

func (c *proxyConn) pipe(src, dst net.Conn) {
	defer c.p.wg.Done()
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// A partition holds the bytes here; the reader behind stops
			// reading once the socket buffers fill, as on a dead link.
			c.p.mu.Lock()
			gate := c.p.gate
			c.p.mu.Unlock()
			<-gate
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
		if c.p.onClose != nil {
			c.p.onClose(time.Now())
		}
	})
}

// cut closes every connection through the proxy at once, as a dead peer
// or a reset would; it returns how many it closed.
func (p *proxy) cut() int {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return len(conns)
}

// partition stops all traffic through the proxy, both ways, until heal:
// nothing is closed, nothing arrives.
func (p *proxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already partitioned
	}
}

func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// close stops listening, ends every connection and waits for the
// proxy's goroutines.
func (p *proxy) close() error {
	p.heal()
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cut()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
