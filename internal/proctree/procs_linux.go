package proctree

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

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

// envHas reports whether pid's environment, as it was started, holds key
// with a value that contains part.
func envHas(pid int, key, part string) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return environHas(env, key, part)
}

// Comm returns the command name of process q ("" once it is gone).
func (q Ref) Comm() string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(q.Pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SessionMembers lists the live (not zombie) processes whose session or
// process group is one of ids.
func SessionMembers(ids ...int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := statFields(b) // state ppid pgrp session
		if len(fields) < 4 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		pgrp, _ := strconv.Atoi(fields[2])
		sid, _ := strconv.Atoi(fields[3])
		if member(ids, pgrp, sid) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, pid)
		}
	}
	return out
}
