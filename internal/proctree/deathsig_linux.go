package proctree

import "syscall"

// deathSignal: the kernel signals a child when its parent dies, so Start
// needs no watchdog. A variable only so that a test can run Start the way
// macOS does (export_test.go).
var deathSignal = true

// DieWithParent asks the kernel to send sig to the child attr starts when
// this process dies (Pdeathsig), and returns attr. Where there is no such
// signal it leaves attr as it is; Start adds the watchdog there.
//
// Pdeathsig is sent when the *thread* that forked the child exits; Go may
// end that thread while this process lives on, so a child that must
// outlive such a thread is also guarded by other means (the terminal's
// reaper).
func DieWithParent(attr *syscall.SysProcAttr, sig syscall.Signal) *syscall.SysProcAttr {
	if deathSignal {
		attr.Pdeathsig = sig
	}
	return attr
}
