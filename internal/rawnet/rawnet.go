// Package rawnet reads and writes TCP connections with system calls the Go
// runtime is not told of (Read, Write; syscall_linux.go says why): a
// listener's accepted connections (Listener), dialled ones (Conn, Dial),
// and dialled ones whose pool health check is raw too (DialChecked, for
// go-redis), with the runtime's poller still waiting for readiness and
// keeping deadlines.
package rawnet

import (
	"context"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/internal/tuning"
)

// Listener wraps ln so that each TCP connection it accepts is a Conn: the
// broker's HTTP server reads and writes with Read and Write, through the
// connection's own poller descriptor, so waits for readiness and deadlines
// are the runtime's as for any net.Conn; only the system calls themselves
// do not wake the runtime's monitor thread. (A WebSocket's connection is
// hijacked into the broker's sock, which calls Read and Write itself.)
//
// What it earns, against the same broker with connections as net makes
// them (TETHER_TUNING=no-rawnet; make bench-peers, 2026-12-04, one
// instance, medians of three rounds' ratios): without it the broker made
// 0.61x (c=1) and 0.68x (c=64) the calls per CPU-second, at 1.39x and
// 1.41x the p99.
func Listener(ln net.Listener) net.Listener { return rawListener{Listener: ln} }

type rawListener struct {
	net.Listener
	always bool // wrap in a race build too (the package's tests)
}

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrap(c, l.always), nil
}

// Conn returns c read and written with Read and Write when it is a
// *net.TCPConn, else c itself (and always c in a race build, see
// raceEnabled, or with the piece off: TETHER_TUNING=no-rawnet).
func Conn(c net.Conn) net.Conn { return wrap(c, false) }

// wrap is Conn; always wraps in a race build too (the package's tests).
func wrap(c net.Conn, always bool) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok || ((raceEnabled || !on) && !always) {
		return c
	}
	return wrapTCP(tc)
}

func wrapTCP(tc *net.TCPConn) net.Conn {
	raw, err := tc.SyscallConn()
	if err != nil {
		return tc
	}
	return &rawTCPConn{TCPConn: tc, raw: raw}
}

// Dial is a dial function (net.Dialer.DialContext's shape) whose TCP
// connections are Conns.
func Dial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return Conn(c), nil
	}
}

// rawTCPConn is a TCP connection whose Read and Write are this package's
// Read and Write; the rest is the *net.TCPConn's.
//
// Concurrency: as net.Conn (the poller descriptor serialises reads, and
// writes).
type rawTCPConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func (c *rawTCPConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, rerr = Read(int(fd), p)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case rerr != nil:
		return 0, c.opError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *rawTCPConn) Write(p []byte) (int, error) {
	done := 0
	var werr error
	err := c.raw.Write(func(fd uintptr) bool {
		for done < len(p) {
			n, e := Write(int(fd), p[done:])
			switch e {
			case nil:
				done += n
			case unix.EINTR:
			case unix.EAGAIN:
				return false
			default:
				werr = e
				return true
			}
		}
		return true
	})
	switch {
	case werr != nil:
		return done, c.opError("write", werr)
	case err != nil:
		return done, c.opError("write", err)
	}
	return done, nil
}

// TryWrite writes what of p the socket under c takes now, without waiting
// for room: n bytes, all of p unless the socket's buffer filled. ok is
// false when c is not one of this package's connections (a race build's,
// or not TCP): then nothing was written, and the caller writes as usual.
// It lets a goroutine that must not block (one that answers calls for many
// callers) write what fits and hand only the rest to a goroutine that may
// wait.
func TryWrite(c net.Conn, p []byte) (n int, ok bool, err error) {
	rc, ok := c.(*rawTCPConn)
	if !ok {
		return 0, false, nil
	}
	var werr error
	err = rc.raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, e := Write(int(fd), p[n:])
			switch e {
			case nil:
				n += m
			case unix.EINTR:
			case unix.EAGAIN:
				return true // no room: the rest is the caller's
			default:
				werr = e
				return true
			}
		}
		return true
	})
	switch {
	case werr != nil:
		return n, true, rc.opError("write", werr)
	case err != nil:
		return n, true, rc.opError("write", err)
	}
	return n, true, nil
}

// opError wraps err as net's own conns do, so that net.Error (timeouts)
// and errors.Is work on it.
func (c *rawTCPConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// on is whether the package reads and writes raw (tuning.RawNet): off,
// Conn, Listener, Dial and DialChecked leave connections as net makes
// them, and Read and Write tell the runtime of their system calls.
var on = tuning.On(tuning.RawNet)
