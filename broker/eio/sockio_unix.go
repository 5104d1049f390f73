//go:build unix

package eio

import (
	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/internal/rawnet"
)

// rawSockets: a sock reads and writes its socket's descriptor itself.
const rawSockets = true

// errWouldBlock is what readFD returns when the socket has nothing yet.
var errWouldBlock error = unix.EAGAIN

// readFD is one read(2), retried on EINTR.
func readFD(fd uintptr, p []byte) (int, error) {
	for {
		n, err := rawnet.Read(int(fd), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
}

// writeFD is one write(2), retried on EINTR: the bytes the socket took,
// 0 and no error when it took none (EAGAIN).
func writeFD(fd uintptr, p []byte) (int, error) {
	for {
		n, err := rawnet.Write(int(fd), p)
		switch err {
		case nil:
			return n, nil
		case unix.EINTR:
		case unix.EAGAIN:
			return 0, nil
		default:
			return 0, err
		}
	}
}
