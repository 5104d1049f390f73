package mcp

import (
	"path"
	"slices"
	"sync"
)

// debugSessions remembers, per debug session started or changed through
// these tools, what the bridge does not report back:
//
//   - the breakpoints the tools set, per file, so debug_run_to can put a
//     file's set back after its temporary breakpoint (DAP replaces a file's
//     whole set on every request). Breakpoints set by other callers (an IDE)
//     on the same session and file are not known here, and are replaced.
//   - whether the first stop is still to be shown: a program started by
//     debug_start runs at once and may reach its first breakpoint before
//     the agent calls debug_continue, which must then show that stop, not
//     resume past it.
//
// Safe for concurrent use.
type debugSessions struct {
	mu       sync.Mutex
	sessions map[string]*debugSession
	order    []string // sessions, oldest first
}

type debugSession struct {
	files     map[string][]lineBreakpoint
	firstStop bool // the first stop is still to be shown
}

// maxRemembered bounds the sessions remembered; the oldest is forgotten.
const maxRemembered = 256

func bpKey(file string) string { return path.Clean(file) }

// sessionLocked returns id's record, made if needed.
func (d *debugSessions) sessionLocked(id string) *debugSession {
	if d.sessions == nil {
		d.sessions = make(map[string]*debugSession)
	}
	s := d.sessions[id]
	if s == nil {
		s = &debugSession{files: make(map[string][]lineBreakpoint)}
		d.sessions[id] = s
		d.order = append(d.order, id)
		if len(d.order) > maxRemembered {
			delete(d.sessions, d.order[0])
			d.order = d.order[1:]
		}
	}
	return s
}

// started records a session debug_start began; firstStop tells whether its
// first stop is still to be shown.
func (d *debugSessions) started(id string, firstStop bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sessionLocked(id).firstStop = firstStop
}

// takeFirstStop reports whether id's first stop is still to be shown, and
// clears it: from now on the agent has seen the session stop (or run).
func (d *debugSessions) takeFirstStop(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[id]
	if s == nil || !s.firstStop {
		return false
	}
	s.firstStop = false
	return true
}

// setBreakpoints records file's set in session id.
func (d *debugSessions) setBreakpoints(id, file string, bps []lineBreakpoint) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sessionLocked(id).files[bpKey(file)] = slices.Clone(bps)
}

// breakpoints returns file's set in session id (nil when none was set).
func (d *debugSessions) breakpoints(id, file string) []lineBreakpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.sessions[id]; s != nil {
		return slices.Clone(s.files[bpKey(file)])
	}
	return nil
}

// forget drops a session.
func (d *debugSessions) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.sessions, id)
	if i := slices.Index(d.order, id); i >= 0 {
		d.order = slices.Delete(d.order, i, i+1)
	}
}
