//go:build !linux

package e2e_test

import "syscall"

// dieWithTest returns attr as it is: only Linux has a parent-death signal,
// and these tests run on Linux (docs/platforms.md); elsewhere they are
// compiled and vetted only.
func dieWithTest(attr *syscall.SysProcAttr) *syscall.SysProcAttr { return attr }
