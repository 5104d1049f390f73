// Package rawnet reads and writes TCP connections with system calls the Go
// runtime is not told of (Read, Write; syscall_linux.go says why): a
// listener's accepted connections (Listener), dialled ones (Conn, Dial),
// and dialled ones whose pool health check is raw too (DialChecked, for
// go-redis), with the runtime's poller still waiting for readiness and
// keeping deadlines.
//
// Only Linux gains from it: elsewhere (macOS, Windows) connections are
// left as net makes them, the same plain way TETHER_TUNING=no-rawnet
// gives on Linux. Read, Write and Peek exist on Unix, where the broker's
// sock (broker/eio) calls them on macOS too, as plain system calls.
package rawnet

import (
	"context"
	"net"

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

// on is whether the package reads and writes raw: where the platform has
// system calls the runtime is not told of (rawSyscalls, Linux only) and
// the piece is on (tuning.RawNet). Off, Conn, Listener, Dial and
// DialChecked leave connections as net makes them, and Read and Write
// tell the runtime of their system calls.
var on = rawSyscalls && tuning.On(tuning.RawNet)
