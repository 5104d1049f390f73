//go:build !windows

package dap

import (
	"fmt"
	"testing"
)

// TestManagerForgetsTheOldestEndedSessionsBeyondKeepEnded: the manager keeps
// the last keepEnded ended sessions whose adapter is gone, and every session
// still running or whose adapter still runs, however many. (Found by the
// e2e session loop: every stopped session stayed listed, with its adapter's
// state, a megabyte and more each.)
func TestManagerForgetsTheOldestEndedSessionsBeyondKeepEnded(t *testing.T) {
	m := &Manager{sessions: map[string]*Session{}}
	session := func(i int, ended, adapterGone bool) *Session {
		s := newSession(fmt.Sprintf("s%03d", i), nil, "/")
		if ended {
			s.state = StateEnded
		}
		if adapterGone {
			close(s.watcherDone)
		}
		return s
	}
	m.addLocked(session(0, false, false)) // running
	m.addLocked(session(1, true, false))  // ended, its adapter still up
	for i := 2; i < keepEnded+12; i++ {
		m.addLocked(session(i, true, true)) // stopped
	}
	m.addLocked(session(999, false, false)) // running
	if len(m.sessions) != keepEnded+3 || len(m.order) != keepEnded+3 {
		t.Fatalf("%d sessions kept (%d in order), want %d: the two running, the one whose adapter runs, the last %d stopped",
			len(m.sessions), len(m.order), keepEnded+3, keepEnded)
	}
	for _, id := range []string{"s000", "s001", "s999", fmt.Sprintf("s%03d", keepEnded+11), "s012"} {
		if m.sessions[id] == nil {
			t.Errorf("session %s was forgotten", id)
		}
	}
	for _, id := range []string{"s002", "s011"} {
		if m.sessions[id] != nil {
			t.Errorf("session %s, among the oldest stopped, is still kept", id)
		}
	}
}
