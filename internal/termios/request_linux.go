package termios

import "golang.org/x/sys/unix"

const (
	getRequest = unix.TCGETS
	setRequest = unix.TCSETS
)
