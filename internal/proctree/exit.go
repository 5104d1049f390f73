//go:build !windows

package proctree

import (
	"os"
	"syscall"
)

// ExitStatus reports a wait status the way a shell does: the exit code,
// or 128+n for a process ended by signal n (-1 for no state). The
// terminal's and the sandbox's sessions report it.
func ExitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
