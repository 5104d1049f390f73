package main

import "golang.org/x/sys/unix"

// The ioctl requests that read and set a terminal's mode (attach's raw
// mode): the BSD names macOS uses (TCSETS's counterpart sets at once,
// without draining, as on Linux).
const (
	getTermios = unix.TIOCGETA
	setTermios = unix.TIOCSETA
)
