//go:build !linux

package redistest

import "syscall"

// dieWithTest asks for nothing: only Linux has a parent-death signal, and
// these servers run in tests, which run on Linux (docs/platforms.md). A
// test binary killed elsewhere leaves its redis-server running.
func dieWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
