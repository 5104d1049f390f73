// Package debugtest tells tests of debugging what this machine's debugger
// can do, where that depends on the machine and not on tether.
//
// Hardware watchpoints are the case: lldb (and gdb) set them in the CPU's
// debug registers, and some virtual machines accept the registers but never
// deliver the trap. There the watchpoint is set and verified, and the
// program runs to its end without stopping; tether can do nothing about
// it, and a test that a watchpoint stops would fail for the machine's
// sake.
package debugtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// probeC writes counter in bump, after main's breakpoint.
const probeC = `int counter = 0;
void bump(void) { counter++; }
int main(void) { bump(); return counter - 1; }
`

var (
	hwOnce sync.Once
	hwOK   bool
	hwWhy  string
)

// HardwareWatchpoints reports whether a hardware watchpoint stops a
// program on this machine, and when not, why: it runs lldb on a small C
// program once per process (about a second) and keeps the answer.
func HardwareWatchpoints() (ok bool, why string) {
	hwOnce.Do(func() { hwOK, hwWhy = probe() })
	return hwOK, hwWhy
}

func probe() (bool, string) {
	lldb := ""
	for _, name := range []string{"lldb", "lldb-19"} {
		if p, err := exec.LookPath(name); err == nil {
			lldb = p
			break
		}
	}
	if lldb == "" {
		return false, "no lldb on PATH to probe hardware watchpoints with"
	}
	dir, err := os.MkdirTemp("", "debugtest-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(dir)
	src, bin := filepath.Join(dir, "w.c"), filepath.Join(dir, "w")
	if err := os.WriteFile(src, []byte(probeC), 0o644); err != nil {
		return false, err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "gcc", "-g", "-O0", "-o", bin, src).CombinedOutput(); err != nil {
		return false, "gcc: " + err.Error() + ": " + string(out)
	}
	out, err := exec.CommandContext(ctx, lldb, "-b", "-o", "breakpoint set -n main", "-o", "run",
		"-o", "watchpoint set variable counter", "-o", "continue", bin).CombinedOutput()
	if strings.Contains(string(out), "stop reason = watchpoint") {
		return true, ""
	}
	if err != nil {
		return false, "lldb: " + err.Error()
	}
	return false, "this machine does not deliver hardware watchpoint traps: lldb set one on a variable and the program ran past the write to its end (a virtual machine without debug-register support)"
}
