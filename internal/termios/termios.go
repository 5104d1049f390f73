//go:build !windows

// Package termios reads and sets a terminal's mode through
// golang.org/x/sys/unix, with each platform's ioctl: TCGETS and TCSETS on
// Linux, TIOCGETA and TIOCSETA on macOS (request_*.go). The terminal
// package sets its shell's pty with it; a client's raw mode can too.
//
// The functions take a descriptor and are safe for concurrent use on
// different descriptors.
package termios

import "golang.org/x/sys/unix"

// Get returns the mode of the terminal fd.
func Get(fd int) (*unix.Termios, error) {
	return unix.IoctlGetTermios(fd, getRequest)
}

// Set sets the mode of the terminal fd at once (no drain, no flush). On a
// pty master it sets the slave's mode.
func Set(fd int, t *unix.Termios) error {
	return unix.IoctlSetTermios(fd, setRequest, t)
}
