package mcp

import (
	"path"
	"slices"
	"sync"
)

// breakpoints remembers the breakpoints the tools set, per debug session
// and file, so debug_run_to can put a file's set back after its temporary
// breakpoint: DAP replaces a file's whole set on every request and the
// bridge does not report the current one. Breakpoints set by other callers
// (an IDE) on the same session and file are not known here, and are
// replaced. Safe for concurrent use.
type breakpoints struct {
	mu       sync.Mutex
	sessions map[string]map[string][]lineBreakpoint // session -> file -> set
	order    []string                               // sessions, oldest first
}

// maxRemembered bounds the sessions remembered; the oldest is forgotten.
const maxRemembered = 256

func bpKey(file string) string { return path.Clean(file) }

// set records file's set in session.
func (b *breakpoints) set(session, file string, bps []lineBreakpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessions == nil {
		b.sessions = make(map[string]map[string][]lineBreakpoint)
	}
	files := b.sessions[session]
	if files == nil {
		files = make(map[string][]lineBreakpoint)
		b.sessions[session] = files
		b.order = append(b.order, session)
		if len(b.order) > maxRemembered {
			delete(b.sessions, b.order[0])
			b.order = b.order[1:]
		}
	}
	files[bpKey(file)] = slices.Clone(bps)
}

// get returns file's set in session (nil when none was set).
func (b *breakpoints) get(session, file string) []lineBreakpoint {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.sessions[session][bpKey(file)])
}

// forget drops a session.
func (b *breakpoints) forget(session string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.sessions, session)
	if i := slices.Index(b.order, session); i >= 0 {
		b.order = slices.Delete(b.order, i, i+1)
	}
}
