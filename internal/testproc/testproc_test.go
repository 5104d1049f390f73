//go:build !windows

package testproc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/leakcheck"
	"github.com/tetherdev/tether/internal/testproc"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }

// A child that exited and left a background job in its group: Stop kills
// the job, says so, and leaves the group empty.
func TestStopKillsWhatTheChildLeftInItsGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & echo started")
	p, err := testproc.Start("sh", cmd, filepath.Join(t.TempDir(), "sh.log"))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if m := testproc.Members(p.Pid()); len(m) != 1 || !strings.Contains(m[0], "(sleep)") {
		t.Fatalf("Members(%d) = %v, want the sleep the shell left", p.Pid(), m)
	}
	err = p.Stop(testproc.GroupGrace)
	if err == nil || !strings.Contains(err.Error(), "left processes in its group") || !strings.Contains(err.Error(), "(sleep)") {
		t.Fatalf("Stop = %v, want it to report the sleep it killed", err)
	}
	if m := testproc.Members(p.Pid()); len(m) != 0 {
		t.Fatalf("Members(%d) = %v after Stop, want none", p.Pid(), m)
	}
}
