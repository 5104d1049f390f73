//go:build !linux

package broker

import "golang.org/x/sys/unix"

// sysRead and sysWrite are read(2) and write(2) (rawio_linux.go says why
// Linux makes them differently).
func sysRead(fd int, p []byte) (int, error)  { return unix.Read(fd, p) }
func sysWrite(fd int, p []byte) (int, error) { return unix.Write(fd, p) }
