//go:build unix && !linux

package rawnet

import "golang.org/x/sys/unix"

// rawSyscalls: this platform's Read and Write are the plain system calls,
// which gain nothing over net's own, so connections stay as net makes
// them (syscall_linux.go says what Linux gains).
const rawSyscalls = false

// Read and Write are read(2) and write(2) (syscall_linux.go says why
// Linux makes them differently).
func Read(fd int, p []byte) (int, error)  { return unix.Read(fd, p) }
func Write(fd int, p []byte) (int, error) { return unix.Write(fd, p) }

// Peek is recv(2) of one byte with MSG_PEEK|MSG_DONTWAIT.
func Peek(fd int) (int, error) {
	var b [1]byte
	n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return n, err
}
