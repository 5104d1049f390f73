//go:build unix && !linux

package proctree

import "syscall"

// WithoutDeathSignal: Start already works without one here.
func WithoutDeathSignal() {}

// DeathSignalOf is the parent-death signal attr asks for: none here.
func DeathSignalOf(attr *syscall.SysProcAttr) syscall.Signal { return 0 }
