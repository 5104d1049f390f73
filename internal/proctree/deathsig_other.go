//go:build unix && !linux

package proctree

import "syscall"

// deathSignal: no parent-death signal here (macOS, the BSDs): Start
// registers each group with the watchdog instead.
const deathSignal = false

// DieWithParent returns attr as it is: this platform has no parent-death
// signal. Start guards its children with the watchdog instead; a caller
// of DieWithParent alone accepts that the child may outlive this process.
func DieWithParent(attr *syscall.SysProcAttr, sig syscall.Signal) *syscall.SysProcAttr {
	return attr
}
