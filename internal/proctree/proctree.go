//go:build !windows

// Package proctree starts, finds and ends process trees: a child that
// cannot outlive this process (Start), the processes below a pid, the
// members of a process group, and a kill that waits until each killed
// process is gone. The debug adapters, the sandbox and the terminal use it
// so that no adapter, debuggee, command or child of theirs outlives its
// owner, even when it left the adapter's process group (lldb-dap starts
// lldb-server with --setsid) or was reparented after its parent died.
//
// How each platform does it:
//
//   - Listing processes: /proc on Linux (procs_linux.go); sysctl
//     kern.proc.all, kern.proc.pid and kern.procargs2 on macOS
//     (procs_darwin.go), which has no /proc.
//   - Orphan-proofing: on Linux the kernel sends a child SIGKILL when this
//     process dies (Pdeathsig). macOS has no parent-death signal, so a
//     watchdog does it (watchdog.go): one small sh per process, started on
//     first use, told over a pipe which process groups to guard. Only this
//     process holds the pipe's write end (close-on-exec, so children never
//     inherit it); when the watchdog reads end of file, this process is
//     gone, whatever killed it, and it SIGKILLs every group still guarded.
//     A process that left its group (setsid) is not reached, as on Linux,
//     where Pdeathsig reaches the group leader only.
//
// Every function is safe for concurrent use.
package proctree

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Ref names a process by pid and start time, so a pid the kernel has given
// to another process since is never signalled.
type Ref struct {
	Pid   int
	Start uint64
}

// entry is one process as the platform's process table describes it.
type entry struct {
	Ref
	ppid, pgrp int
}

// Start starts cmd as the leader of a process group of its own (cmd's
// SysProcAttr may ask for a session instead with Setsid) that cannot
// outlive this process: Pdeathsig where the kernel has it, the watchdog
// elsewhere. Call Reaped with the pid once the leader has been waited for,
// and Forget once the group has been killed, so that a later group with
// the same id is never touched.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid = true
	}
	DieWithParent(cmd.SysProcAttr, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		return err
	}
	if !deathSignal {
		defaultWatchdog().Watch(cmd.Process.Pid)
	}
	return nil
}

// Forget stops guarding the process group pgid (one Start made): it ended,
// or its owner killed it. A no-op where the kernel does the guarding.
func Forget(pgid int) {
	if !deathSignal {
		defaultWatchdog().Forget(pgid)
	}
}

// Reaped is called once the leader of a group Start made has been waited
// for. If nothing is left in the group it is forgotten: its id is free
// for the kernel to give to another group, which the watchdog must then
// never kill. Otherwise the group still exists, so its id cannot be
// reused, and it stays guarded until Forget. A no-op where the kernel
// does the guarding.
func Reaped(pgid int) {
	if !deathSignal && len(Group(pgid)) == 0 {
		defaultWatchdog().Forget(pgid)
	}
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
			time.Sleep(5 * time.Millisecond) // no event tells that a non-child has exited
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
	var out []Ref
	self := os.Getpid()
	for _, e := range processes() {
		if e.Pid == self {
			continue
		}
		if envHas(e.Pid, key, part) && e.Running() {
			out = append(out, e.Ref)
		}
	}
	return out
}

// member reports whether a process of group pgrp and session sid belongs
// to one of ids, each a session or a process group.
func member(ids []int, pgrp, sid int) bool {
	for _, id := range ids {
		if sid == id || pgrp == id {
			return true
		}
	}
	return false
}

// Prepare starts now what Start will need: the watchdog, where the kernel
// has no parent-death signal. A leak check calls it before its baseline,
// so the watchdog's pipe is not counted as a descriptor its tests leaked.
func Prepare() {
	if !deathSignal {
		defaultWatchdog()
	}
}
