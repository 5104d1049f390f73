//go:build unix

package rawnet

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// checked is c with a raw health check when it is one of this package's
// connections (wrap made it), else c.
func checked(c net.Conn) net.Conn {
	if rc, ok := c.(*rawTCPConn); ok {
		return &checkedConn{rawTCPConn: rc}
	}
	return c
}

// checkedConn is a rawTCPConn whose SyscallConn is a checkRawConn.
type checkedConn struct{ *rawTCPConn }

func (c *checkedConn) SyscallConn() (syscall.RawConn, error) { return checkRawConn{c.raw}, nil }

// checkRawConn is a RawConn whose Read is a health check (DialChecked).
type checkRawConn struct{ syscall.RawConn }

func (r checkRawConn) Read(func(fd uintptr) bool) error {
	var n int
	var perr error
	if err := r.Control(func(fd uintptr) {
		for {
			if n, perr = Peek(int(fd)); perr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	switch {
	case perr == unix.EAGAIN:
		return nil
	case perr != nil:
		return perr
	case n == 0:
		return io.EOF
	}
	return ErrUnexpectedData
}
