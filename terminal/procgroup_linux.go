package terminal

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Session membership read straight from /proc, tuned for the check after
// every hidden command (procgroup_darwin.go is the macOS form).

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
// process group is one of ids. It reads all of /proc: about 30 µs a
// process.
func sessionMembers(ids ...int) []int {
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
		if st, ok := readProcStat(pid); ok && st.member(ids) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (st procStat) member(ids []int) bool {
	if st.state == 'Z' || st.state == 'X' {
		return false
	}
	for _, id := range ids {
		if st.sid == id || st.pgrp == id {
			return true
		}
	}
	return false
}

// fastScanFor bounds how long a session may have lived for
// sessionMayHaveMembers to trust pid order: wrapping all the way around
// pid_max (32768 by default) takes far longer than this.
const fastScanFor = time.Second

// fastScanMax bounds how many pids sessionMayHaveMembers probes one by
// one before it reads /proc instead.
const fastScanMax = 256

// sessionMayHaveMembers reports whether the session led by id, whose
// leader has been reaped, may still have live members; false means it
// certainly has none. It is the cheap check after every hidden command,
// replacing a read of all of /proc (about 3 ms) with a few reads:
//
//   - kill(-id, 0) finds a member in the leader's own process group, where
//     `cmd &` in a non-interactive shell puts background jobs.
//   - Members in other groups (set -m, timeout, anything calling setpgid)
//     are descendants of the leader, forked after it, and the kernel hands
//     out pids in increasing order until it wraps at pid_max. So unless
//     the pids wrapped, every member has a pid in (id, ns_last_pid], and
//     reading /proc/<pid>/stat for just those pids finds it. A session
//     younger than fastScanFor cannot have seen the pids wrap all the way
//     round; ns_last_pid below id means they wrapped at least once.
//
// Anything it cannot rule out answers true, and the caller does the full
// scan.
func sessionMayHaveMembers(id int, age time.Duration) bool {
	if err := syscall.Kill(-id, 0); err == nil || !errors.Is(err, syscall.ESRCH) {
		return true
	}
	if age >= fastScanFor {
		return true
	}
	b, err := os.ReadFile("/proc/sys/kernel/ns_last_pid")
	if err != nil {
		return true
	}
	last, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || last < id || last-id > fastScanMax {
		return true
	}
	ids := []int{id}
	for pid := id + 1; pid <= last; pid++ {
		// A pid here may be a thread, whose stat names its process's
		// session: a member either way.
		if st, ok := readProcStat(pid); ok && st.member(ids) {
			return true
		}
	}
	return false
}
