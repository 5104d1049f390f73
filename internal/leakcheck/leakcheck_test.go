//go:build !windows

package leakcheck_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/leakcheck"
	"github.com/tetherdev/tether/internal/testwait"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

// An orphan in a session of its own (what a bridge's command becomes when
// the bridge is killed) is still found by its mark, and Check kills it.
func TestCheckFindsAndKillsAProcessThatLeftItsParent(t *testing.T) {
	b := leakcheck.Begin()
	// sh starts sleep in a new session and exits: sleep is reparented.
	cmd := exec.Command("sh", "-c", "setsid sleep 60 >/dev/null 2>&1 & echo $!")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pid %q: %v", out, err)
	}
	err = b.Check(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(pid)+" (sleep)") {
		t.Fatalf("Check = %v, want the orphaned sleep %d reported", err, pid)
	}
	testwait.Until(t, 5*time.Second, func() bool { return syscall.Kill(pid, 0) != nil || zombie(pid) },
		"the reported sleep %d to be killed", pid)
	if err := b.Check(time.Second); err != nil {
		t.Fatalf("Check after the kill = %v, want nothing left", err)
	}
}

func TestCheckFindsAnOpenDescriptor(t *testing.T) {
	b := leakcheck.Begin()
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(100 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(int(f.Fd()))+" -> "+f.Name()) {
		t.Fatalf("Check = %v, want descriptor %d (%s) reported", err, f.Fd(), f.Name())
	}
	f.Close()
	if err := b.Check(time.Second); err != nil {
		t.Fatalf("Check after closing = %v, want nothing left", err)
	}
}

// zombie reports whether pid is a zombie (killed, not yet reaped by its
// new parent).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i+1:]), " Z")
}
