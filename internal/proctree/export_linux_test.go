package proctree

import "syscall"

// WithoutDeathSignal makes Start and DieWithParent behave as on macOS: no
// Pdeathsig, the watchdog instead. For a test binary's helper process only.
func WithoutDeathSignal() { deathSignal = false }

// DeathSignalOf is the parent-death signal attr asks for.
func DeathSignalOf(attr *syscall.SysProcAttr) syscall.Signal { return attr.Pdeathsig }
