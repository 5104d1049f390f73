//go:build !linux

package rawnet

import "golang.org/x/sys/unix"

// Read and Write are read(2) and write(2) (syscall_linux.go says why
// Linux makes them differently).
func Read(fd int, p []byte) (int, error)  { return unix.Read(fd, p) }
func Write(fd int, p []byte) (int, error) { return unix.Write(fd, p) }
