//go:build linux

package rawnet

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawSyscalls: Linux has the system calls below, so connections are
// wrapped (while the piece is on).
const rawSyscalls = true

// Read and Write are read(2) and write(2) of a non-blocking socket
// that do not tell the Go runtime they enter a system call (RawSyscall, as
// the runtime's own netpoller calls epoll). A system call the runtime is
// told of wakes its monitor thread (sysmon) if it was asleep because every
// P was idle, and sysmon then polls every 20 µs until they are idle again.
// A broker answering one call at a time goes idle between every read and
// the next: perf showed sysmon at 23% of its CPU, and the futex wakes for
// it at another 10%. A non-blocking socket's read or write never waits, so
// the runtime has nothing to hand off while it runs. With the piece off
// (TETHER_TUNING=no-rawnet) they are unix.Read and unix.Write.
func Read(fd int, p []byte) (int, error) {
	if !on {
		return unix.Read(fd, p)
	}
	return rawIO(unix.SYS_READ, fd, p)
}

func Write(fd int, p []byte) (int, error) {
	if !on {
		return unix.Write(fd, p)
	}
	return rawIO(unix.SYS_WRITE, fd, p)
}

// rawIO is the system call trap (read or write) on fd and p.
func rawIO(trap uintptr, fd int, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Peek is recv(2) of one byte with MSG_PEEK|MSG_DONTWAIT: what is waiting on
// the socket, without taking it and without telling the runtime (as Read).
func Peek(fd int) (int, error) {
	var b [1]byte
	n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
