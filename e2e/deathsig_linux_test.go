package e2e_test

import "syscall"

// dieWithTest makes the child attr starts end with the test binary, should
// it die without running its cleanups: the kernel sends it SIGKILL
// (Pdeathsig). It returns attr.
func dieWithTest(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	attr.Pdeathsig = syscall.SIGKILL
	return attr
}
