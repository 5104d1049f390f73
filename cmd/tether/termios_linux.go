package main

import "golang.org/x/sys/unix"

// The ioctl requests that read and set a terminal's mode (attach's raw
// mode): Linux's names.
const (
	getTermios = unix.TCGETS
	setTermios = unix.TCSETS
)
