package terminal

import (
	"errors"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// Session membership on macOS, which has no /proc: the process table from
// sysctl and each process's session from getsid, through proctree.

// sessionMembers lists the live (not zombie) processes whose session or
// process group is one of ids.
func sessionMembers(ids ...int) []int { return proctree.SessionMembers(ids...) }

// sessionMayHaveMembers reports whether the session led by id, whose
// leader has been reaped, may still have live members; false means it
// certainly has none. A member in the leader's own process group answers
// at once (kill(-id, 0)); otherwise the process table is read, since
// macOS hands out pids in no order the Linux shortcut could trust.
func sessionMayHaveMembers(id int, _ time.Duration) bool {
	if err := syscall.Kill(-id, 0); err == nil || !errors.Is(err, syscall.ESRCH) {
		return true
	}
	return len(sessionMembers(id)) > 0
}
