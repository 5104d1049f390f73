package proctree

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// cwdTimeout bounds the lsof that Cwd runs.
const cwdTimeout = 2 * time.Second

// Cwd returns the current directory of process pid: "" when it is gone,
// not ours to read, or cannot be learnt in time.
//
// macOS tells a process's directory only through libproc's proc_pidinfo
// (PROC_PIDVNODEPATHINFO), which golang.org/x/sys/unix does not wrap and
// a raw system call may not reach; lsof, part of every macOS install, asks
// it for us. It takes tens of milliseconds, once per visible command that
// names no directory.
func Cwd(pid int) string {
	ctx, cancel := context.WithTimeout(context.Background(), cwdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/sbin/lsof", "-a", "-p", strconv.Itoa(pid), "-d", "cwd", "-Fn").Output()
	if err != nil {
		return ""
	}
	// -F output: one field per line, its letter first ("p123", "fcwd",
	// "n/the/path").
	for line := range strings.SplitSeq(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, "n"); ok && strings.HasPrefix(p, "/") {
			return p
		}
	}
	return ""
}
