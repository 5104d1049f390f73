//go:build !windows

package dap_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// descendants lists the live (non-zombie) processes below this one, as
// "pid command".
func descendants() []string {
	parent := map[int]int{}
	name := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(s[:open])[0])
		ppid, _ := strconv.Atoi(f[1])
		parent[pid], name[pid] = ppid, s[open+1:close]
	}
	self := os.Getpid()
	var out []string
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == self {
				out = append(out, strconv.Itoa(pid)+" "+name[pid])
				break
			}
		}
	}
	return out
}
