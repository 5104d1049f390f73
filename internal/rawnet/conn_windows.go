package rawnet

import "net"

// rawSyscalls: Windows sockets are not read with read(2); connections stay
// as net makes them.
const rawSyscalls = false

// wrapTCP leaves tc as it is: there is no raw path on Windows. Only the
// package's tests (ListenerForTest) ask for it, and they are Unix-only.
func wrapTCP(tc *net.TCPConn) net.Conn { return tc }

// checked leaves c as it is: with no raw connection there is no raw
// health check, and the client checks as it does on any net.Conn.
func checked(c net.Conn) net.Conn { return c }

// TryWrite reports ok false: no connection is this package's on Windows,
// so the caller writes as usual (conn_unix.go has the function's use).
func TryWrite(net.Conn, []byte) (n int, ok bool, err error) { return 0, false, nil }
