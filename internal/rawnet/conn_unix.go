//go:build unix

package rawnet

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// wrapTCP makes tc a Conn, or leaves it as it is if it has no raw access.
func wrapTCP(tc *net.TCPConn) net.Conn {
	raw, err := tc.SyscallConn()
	if err != nil {
		return tc
	}
	return &rawTCPConn{TCPConn: tc, raw: raw}
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
