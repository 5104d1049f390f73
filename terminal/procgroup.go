package terminal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Every command runs as the leader of its own session (hidden processes)
// or its own job in the visible shell's session, so "everything the
// command started" is "every process in that session". Processes that call
// setsid themselves leave it on purpose and are not tracked.

// procStat is the part of /proc/<pid>/stat tether needs.
type procStat struct {
	pid, pgrp, sid int
	state          byte
}

// readProcStat parses /proc/<pid>/stat. The command name may contain
// spaces and parentheses, so fields are counted from the last ')'.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	k := bytes.LastIndexByte(b, ')')
	if k < 0 || k+2 >= len(b) {
		return procStat{}, false
	}
	f := bytes.Fields(b[k+2:])
	// state ppid pgrp session
	if len(f) < 4 || len(f[0]) != 1 {
		return procStat{}, false
	}
	pgrp, err1 := strconv.Atoi(string(f[2]))
	sid, err2 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, pgrp: pgrp, sid: sid, state: f[0][0]}, true
}

// sessionMembers lists the live (not zombie) processes whose session or
// process group is id.
func sessionMembers(id int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var pids []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		st, ok := readProcStat(pid)
		if !ok || st.state == 'Z' || st.state == 'X' {
			continue
		}
		if st.sid == id || st.pgrp == id {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signalSession sends sig to the process group id and to every other
// member of the session id, so jobs a shell put in their own groups get
// it too. It reports whether any process was left to signal.
func signalSession(id int, sig syscall.Signal) bool {
	found := syscall.Kill(-id, sig) == nil
	for _, pid := range sessionMembers(id) {
		if syscall.Kill(pid, sig) == nil {
			found = true
		}
	}
	return found
}

// terminateSession sends first (SIGTERM for a command; an interactive
// shell ignores SIGTERM and is sent SIGHUP, which it passes to its jobs)
// to the session id, waits up to grace for it to empty, then SIGKILLs what
// is left. When ctx ends it stops waiting and SIGKILLs at once.
func terminateSession(ctx context.Context, id int, grace time.Duration, first ...syscall.Signal) {
	found := false
	for _, sig := range first {
		if signalSession(id, sig) {
			found = true
		}
	}
	if !found || waitSessionEmpty(ctx, id, grace) {
		return
	}
	signalSession(id, syscall.SIGKILL)
	waitSessionEmpty(context.Background(), id, grace)
}

// waitSessionEmpty polls until no live process is in session id, up to d.
func waitSessionEmpty(ctx context.Context, id int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if len(sessionMembers(id)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// exitStatus reports a wait status the way a shell does: the exit code,
// or 128+signal for a process killed by a signal.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

var errGone = errors.New("process has exited")
