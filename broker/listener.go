package broker

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listener wraps the broker's listener so that the HTTP server reads and
// writes each TCP connection with sysRead and sysWrite (rawio_linux.go),
// through the connection's own poller descriptor: waits for readiness and
// deadlines are the runtime's, as for any net.Conn; only the system calls
// themselves are made without waking the runtime's monitor thread. A
// WebSocket's connection is hijacked into a sock (socket.go), which does
// the same.
//
// Measured (bench-peers, one instance, c=1, 2 cores): see the commit that
// added it.
func Listener(ln net.Listener) net.Listener { return rawListener{ln} }

type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	return &rawTCPConn{TCPConn: tc, raw: raw}, nil
}

// rawTCPConn is a TCP connection whose Read and Write are sysRead and
// sysWrite; the rest is the *net.TCPConn's.
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
			n, rerr = sysRead(int(fd), p)
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
			n, e := sysWrite(int(fd), p[done:])
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

// opError wraps err as net's own conns do, so that net.Error (timeouts)
// and errors.Is work on it.
func (c *rawTCPConn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
