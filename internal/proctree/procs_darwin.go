package proctree

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// macOS has no /proc: the process table comes from sysctl (kern.proc.*,
// struct kinfo_proc), an environment from kern.procargs2.

// sZomb is p_stat of a zombie (SZOMB in <sys/proc.h>).
const sZomb = 5

// refOf is the Ref of the process k describes: its start time, in
// microseconds since the epoch, tells apart two processes given one pid.
func refOf(k *unix.KinfoProc) Ref {
	tv := k.Proc.P_starttime
	return Ref{int(k.Proc.P_pid), uint64(tv.Sec)*1_000_000 + uint64(tv.Usec)}
}

// Of returns the Ref of the running process pid (ok false if there is none).
func Of(pid int) (Ref, bool) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(k.Proc.P_pid) != pid {
		return Ref{}, false
	}
	return refOf(k), true
}

// Running reports whether q still runs: its pid names the same process
// (same start time) and that process is not a zombie.
func (q Ref) Running() bool {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", q.Pid)
	if err != nil || int(k.Proc.P_pid) != q.Pid || k.Proc.P_stat == sZomb {
		return false
	}
	return refOf(k) == q
}

// processes reads the process table.
func processes() []entry {
	all, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	out := make([]entry, 0, len(all))
	for i := range all {
		k := &all[i]
		out = append(out, entry{refOf(k), int(k.Eproc.Ppid), int(k.Eproc.Pgid)})
	}
	return out
}

// envHas reports whether pid's environment, as it was started, holds key
// with a value that contains part.
func envHas(pid int, key, part string) bool {
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return false
	}
	env, ok := procargsEnv(b)
	return ok && environHas(env, key, part)
}

// Comm returns the command name of process q ("" once it is gone).
func (q Ref) Comm() string {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", q.Pid)
	if err != nil || int(k.Proc.P_pid) != q.Pid {
		return ""
	}
	name := k.Proc.P_comm[:]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return string(name)
}

// SessionMembers lists the live (not zombie) processes whose session or
// process group is one of ids. kinfo_proc names a session only by a kernel
// address, so each candidate's session id comes from getsid(2).
func SessionMembers(ids ...int) []int {
	all, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil
	}
	var out []int
	for i := range all {
		k := &all[i]
		if k.Proc.P_stat == sZomb {
			continue
		}
		pid, pgrp := int(k.Proc.P_pid), int(k.Eproc.Pgid)
		if member(ids, pgrp, -1) {
			out = append(out, pid) // its group says so: no getsid needed
			continue
		}
		if sid, err := unix.Getsid(pid); err == nil && member(ids, pgrp, sid) {
			out = append(out, pid)
		}
	}
	return out
}
