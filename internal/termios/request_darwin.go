package termios

import "golang.org/x/sys/unix"

// The BSD names of the same requests.
const (
	getRequest = unix.TIOCGETA
	setRequest = unix.TIOCSETA
)
