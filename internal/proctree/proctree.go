// Package proctree finds and ends process trees through /proc: the
// processes below a pid, the members of a process group, and a kill that
// waits until each killed process is gone. The debug adapters use it so
// that no adapter, debuggee or child of theirs outlives its session, even
// when it left the adapter's process group (lldb-dap starts lldb-server
// with --setsid) or was reparented after its parent died.
//
// Linux only; every function is safe for concurrent use.
package proctree

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ref names a process by pid and start time, so a pid the kernel has given
// to another process since is never signalled.
type Ref struct {
	Pid   int
	Start uint64
}

// Of returns the Ref of the running process pid (ok false if there is none).
func Of(pid int) (Ref, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Ref{}, false
	}
	f := statFields(b)
	if len(f) < 20 {
		return Ref{}, false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return Ref{pid, st}, err == nil
}

// KillWait bounds how long KillAll waits for the processes it killed.
const KillWait = 2 * time.Second

// KillAll SIGKILLs procs and waits (up to KillWait) until they are gone: a
// debuggee is often not our child (lldb-server's, or reparented), so
// nothing else waits for it, and a session that reports it stopped must
// leave no process behind.
func KillAll(procs []Ref) {
	var killed []Ref
	for _, q := range procs {
		if q.Running() {
			_ = syscall.Kill(q.Pid, syscall.SIGKILL)
			killed = append(killed, q)
		}
	}
	deadline := time.Now().Add(KillWait)
	for _, q := range killed {
		for q.Running() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// KillGroup SIGKILLs process group pgid and the processes in also, and
// waits until they are gone. The group is listed afresh, so a member forked
// after also was taken is waited for too.
func KillGroup(pgid int, also []Ref) {
	procs := append(also, Group(pgid)...)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	KillAll(procs)
}

// Running reports whether q still runs: its pid names the same process
// (same start time) and that process is not a zombie.
func (q Ref) Running() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(q.Pid) + "/stat")
	if err != nil {
		return false
	}
	f := statFields(b)
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && st == q.Start
}

// statFields returns the fields of /proc/pid/stat after the command name
// (the first is the state, field 3).
func statFields(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// entry is one process as /proc/PID/stat describes it.
type entry struct {
	Ref
	ppid, pgrp int
}

// processes reads every process from /proc.
func processes() []entry {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := make([]entry, 0, len(stats))
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := statFields(b)
		if len(fields) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		pgrp, _ := strconv.Atoi(fields[2])
		start, _ := strconv.ParseUint(fields[19], 10, 64)
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		out = append(out, entry{Ref{pid, start}, ppid, pgrp})
	}
	return out
}

// Descendants lists the processes below pid.
func Descendants(pid int) []Ref {
	children := map[int][]Ref{}
	for _, e := range processes() {
		children[e.ppid] = append(children[e.ppid], e.Ref)
	}
	var out []Ref
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c.Pid)
		}
	}
	return out
}

// Group lists the processes of process group pgid.
func Group(pgid int) []Ref {
	var out []Ref
	for _, e := range processes() {
		if e.pgrp == pgid {
			out = append(out, e.Ref)
		}
	}
	return out
}

// WithEnv lists the running processes (not zombies) whose environment, as
// they were started, holds key with a value that contains part. A variable
// set by a test binary and inherited down the tree marks every process it
// started, directly or not, even one that left its process group and was
// reparented after its parent died. Processes whose environment cannot be
// read (another user's, already gone) are not listed.
func WithEnv(key, part string) []Ref {
	prefix := []byte(key + "=")
	var out []Ref
	self := os.Getpid()
	for _, e := range processes() {
		if e.Pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(e.Pid) + "/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, prefix); ok && bytes.Contains(v, []byte(part)) && e.Running() {
				out = append(out, e.Ref)
				break
			}
		}
	}
	return out
}

// Comm returns the command name of process q ("" once it is gone).
func (q Ref) Comm() string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(q.Pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
