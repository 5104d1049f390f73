//go:build !windows

package proctree_test

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testwait"
)

// startTree starts, through proctree.Start, a shell whose two background
// sleeps are its children, and returns it with the sleeps' pids.
func startTree(t *testing.T, attr *syscall.SysProcAttr) (*exec.Cmd, []proctree.Ref) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; sleep 60 & echo $!; wait")
	cmd.SysProcAttr = attr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proctree.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		proctree.Forget(cmd.Process.Pid)
	})
	sc := bufio.NewScanner(out)
	var kids []proctree.Ref
	for len(kids) < 2 && sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil {
			t.Fatalf("pid line %q: %v", sc.Text(), err)
		}
		ref, ok := proctree.Of(pid)
		if !ok {
			t.Fatalf("sleep %d is not running", pid)
		}
		kids = append(kids, ref)
	}
	if len(kids) < 2 {
		t.Fatalf("the shell printed %d pids, want 2", len(kids))
	}
	return cmd, kids
}

// Start makes the child lead a group of its own, Descendants finds its
// children, and KillGroup leaves none of them running.
func TestKillGroupKillsGrandchildren(t *testing.T) {
	cmd, kids := startTree(t, nil)
	pgid := cmd.Process.Pid
	if got, _ := syscall.Getpgid(pgid); got != pgid {
		t.Fatalf("the child's group is %d, want its own (%d)", got, pgid)
	}
	desc := proctree.Descendants(pgid)
	for _, k := range kids {
		if !slices.Contains(desc, k) {
			t.Fatalf("Descendants(%d) = %v, missing the sleep %v", pgid, desc, k)
		}
	}
	group := proctree.Group(pgid)
	if len(group) < 3 {
		t.Fatalf("Group(%d) = %v, want the shell and its two sleeps", pgid, group)
	}
	proctree.KillGroup(pgid, desc)
	for _, k := range kids {
		if k.Running() {
			t.Errorf("sleep %d still runs after KillGroup", k.Pid)
		}
	}
	if _, err := cmd.Process.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A session leader started with Setsid (a terminal's command) keeps its
// session, and SessionMembers lists it and its children.
func TestSessionMembersListsASessionsProcesses(t *testing.T) {
	cmd, kids := startTree(t, &syscall.SysProcAttr{Setsid: true})
	sid := cmd.Process.Pid
	members := proctree.SessionMembers(sid)
	for _, pid := range []int{sid, kids[0].Pid, kids[1].Pid} {
		if !slices.Contains(members, pid) {
			t.Fatalf("SessionMembers(%d) = %v, missing %d", sid, members, pid)
		}
	}
	if slices.Contains(members, os.Getpid()) {
		t.Fatalf("SessionMembers(%d) = %v lists the test itself", sid, members)
	}
}

// Of and Running tell a process apart from a later one with its pid: a
// Ref whose start time differs is not running.
func TestRunningComparesStartTimes(t *testing.T) {
	ref, ok := proctree.Of(os.Getpid())
	if !ok || !ref.Running() {
		t.Fatalf("Of(self) = %v, %v; want a running Ref", ref, ok)
	}
	if (proctree.Ref{Pid: ref.Pid, Start: ref.Start + 1}).Running() {
		t.Fatal("a Ref with another start time counts as running")
	}
	if ref.Comm() == "" {
		t.Fatal("Comm of this process is empty")
	}
}

// The watchdog is the orphan-proofing where there is no parent-death
// signal (macOS). It is plain Unix, so it runs here: kill -9 the process
// that owns it, and the group it guards ends within a bound.
func TestWatchdogKillsGuardedGroupWhenItsOwnerDies(t *testing.T) {
	killOwnerAndWait(t, "watch")
}

// Start, run as on macOS (no Pdeathsig), guards its child through the
// package's own watchdog: kill -9 the process that started it, and the
// child ends within a bound.
func TestStartWithoutDeathSignalGuardsTheChildByTheWatchdog(t *testing.T) {
	killOwnerAndWait(t, "start")
}

// A group whose leader was reaped while a member lives on stays guarded.
func TestReapedKeepsAGroupWithMembersGuarded(t *testing.T) {
	killOwnerAndWait(t, "reaped")
}

// killOwnerAndWait runs the test binary as an owner (ownerMain, in mode),
// kills it with SIGKILL, and waits for the sleep it guarded to end.
func killOwnerAndWait(t *testing.T, mode string) {
	owner := exec.Command(os.Args[0], "-test.run=^$")
	owner.Env = append(os.Environ(), ownerEnv+"="+mode)
	owner.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := owner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-owner.Process.Pid, syscall.SIGKILL)
		_ = owner.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the owner's sleep pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the owner said %q", line)
	}
	sleep, ok := proctree.Of(pid)
	if !ok {
		t.Fatalf("the owner's sleep %d is not running", pid)
	}
	t.Cleanup(func() { proctree.KillAll([]proctree.Ref{sleep}) })

	_ = owner.Process.Signal(syscall.SIGKILL)
	_ = owner.Wait()
	testwait.Until(t, 5*time.Second, func() bool { return !sleep.Running() },
		"the guarded sleep %d to end after its owner was killed", pid)
}

// A group the owner forgot, or a watchdog closed, is left alone.
func TestWatchdogLeavesForgottenGroupsAlone(t *testing.T) {
	d, err := proctree.NewWatchdog()
	if err != nil {
		t.Fatal(err)
	}
	var refs []proctree.Ref
	for range 2 {
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ref, _ := proctree.Of(cmd.Process.Pid)
		refs = append(refs, ref)
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		d.Watch(cmd.Process.Pid)
	}
	d.Forget(refs[0].Pid)
	if err := d.Close(); err != nil {
		t.Fatalf("the watchdog failed: %v", err)
	}
	for _, r := range refs {
		if !r.Running() {
			t.Fatalf("sleep %d was killed by a watchdog that was closed (or had forgotten it)", r.Pid)
		}
	}
}
