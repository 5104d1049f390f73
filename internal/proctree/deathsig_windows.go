package proctree

import "syscall"

// DieWithParent leaves attr as it is on Windows, which has no signal for a
// parent's death. Only test harnesses that also vet for Windows (Redis
// started by broker/bus/redistest) call it there; the bridge, which starts
// children that must not outlive it, does not build for Windows.
func DieWithParent(attr *syscall.SysProcAttr, _ syscall.Signal) *syscall.SysProcAttr {
	return attr
}
