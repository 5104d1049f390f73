package rawnet

import (
	"context"
	"errors"
	"net"
)

// ErrUnexpectedData is what a checked connection's health check reports
// when bytes wait on a connection nobody is reading: a reply nobody asked
// for, so the connection is out of step and must not be used.
var ErrUnexpectedData = errors.New("rawnet: unexpected data on an idle connection")

// DialChecked is Dial for clients that check a pooled connection's health
// before each use through syscall.Conn (go-redis does: it peeks the
// socket with a system call inside RawConn.Read, which the runtime is told
// of, so it wakes sysmon on every command, see Read). Its connections'
// SyscallConn gives a RawConn whose Read does that check itself, with a
// raw peek: nil while nothing waits on the socket, io.EOF once the peer
// closed, ErrUnexpectedData when bytes wait, the socket's error otherwise;
// it never calls the function it is given, which only a caller that uses
// Read for a health check can accept.
func DialChecked(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialChecked(d, false)
}

// dialChecked is DialChecked; always wraps in a race build too (tests).
func dialChecked(d *net.Dialer, always bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return checked(wrap(c, always)), nil
	}
}
