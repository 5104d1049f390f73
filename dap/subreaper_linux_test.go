package dap_test

import "syscall"

// becomeSubreaper makes orphaned grandchildren (a debuggee whose adapter
// died) reparent to this test process, so descendants still finds them.
func becomeSubreaper() {
	const prSetChildSubreaper = 36
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
