package redistest

import "syscall"

// dieWithTest makes the redis-server a test starts end with the test
// binary, should it die without running its cleanups: the kernel sends it
// SIGKILL (Pdeathsig).
func dieWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
