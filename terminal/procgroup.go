//go:build !windows

package terminal

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// Every command runs as the leader of its own session (hidden processes)
// or its own job in the visible shell's session, so "everything the
// command started" is "every process in that session". Processes that call
// setsid themselves leave it on purpose and are not tracked.

// signalSession sends sig to the process group id and to every other
// member of the session id, so jobs a shell put in their own groups get
// it too. It reports whether any process was left to signal.
func signalSession(id int, sig syscall.Signal) bool {
	return signalSessions([]int{id}, sig)
}

// terminateSession sends first (SIGTERM for a command; an interactive
// shell ignores SIGTERM and is sent SIGHUP, which it passes to its jobs)
// to the session id, waits up to grace for it to empty, then SIGKILLs what
// is left. When ctx ends it stops waiting and SIGKILLs at once.
func terminateSession(ctx context.Context, id int, grace time.Duration, first ...syscall.Signal) {
	found := false
	for _, sig := range first {
		if signalSession(id, sig) {
			found = true
		}
	}
	if !found || waitSessionEmpty(ctx, id, grace) {
		return
	}
	signalSession(id, syscall.SIGKILL)
	waitSessionEmpty(context.Background(), id, grace)
}

// waitSessionEmpty polls until no live process is in session id, up to d.
func waitSessionEmpty(ctx context.Context, id int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if len(sessionMembers(id)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// exitStatus is proctree.ExitStatus: 128+n for signal n.
func exitStatus(ps *os.ProcessState) int { return proctree.ExitStatus(ps) }

var errGone = errors.New("process has exited")
