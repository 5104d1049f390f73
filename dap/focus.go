//go:build !windows

package dap

import (
	"context"
	"path/filepath"
	"strings"
)

// focusReasons are the stops whose top frame is where the program was
// stopped, not a place its code chose: an exception or panic raised
// inside a library or the runtime (a Go panic's top frames are
// runtime.gopanic, a C abort's libc's raise, a Python error raised in the
// json module its decoder), a signal, a pause (which lands in a system
// call or the scheduler). A breakpoint, step, entry or watchpoint stop is
// where the user asked to be, and keeps its top frame.
var focusReasons = map[string]bool{"exception": true, "signal": true, "pause": true}

// dependencyDirs are directories inside a workspace that hold other
// people's code: a frame in one is not the program's own.
var dependencyDirs = []string{"node_modules", "site-packages", "dist-packages", "vendor"}

// focus is the index in frames of the frame a stop's scopes, locals and
// default evaluations are of: the top frame, except for a stop in
// focusReasons or a post-mortem session (a core is always dumped from
// wherever the program was), whose first frame inside the session's root
// (and outside its dependencyDirs) is taken; the top frame again when no
// frame is inside. It is the one rule of it: Snapshot, Evaluate and
// SetWatchpoints follow it.
func (s *Session) focus(frames []Frame, stop *StopInfo) int {
	if len(frames) == 0 || s.root == "" || !s.looksBelowTop(stop) {
		return 0
	}
	for i, f := range frames {
		if ownCode(s.root, f.Path) {
			return i
		}
	}
	return 0
}

// looksBelowTop reports whether focus may take a frame below the top one
// for stop: a post-mortem session, or a stop in focusReasons.
func (s *Session) looksBelowTop(stop *StopInfo) bool {
	return s.core != nil || (stop != nil && focusReasons[stop.Reason])
}

// ownCode reports whether path is a file of the workspace at root, not
// of a dependency it holds.
func ownCode(root, path string) bool {
	if path == "" || !filepath.IsAbs(path) {
		return false
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	for _, part := range strings.Split(filepath.ToSlash(filepath.Dir(rel)), "/") {
		for _, dep := range dependencyDirs {
			if part == dep {
				return false
			}
		}
	}
	return true
}

// stopFrame fetches the frame of stop's thread that the stop's snapshot
// shows by default (focus): the frame an evaluation without a frame and a
// watched expression are read in, so they see what the snapshot showed.
// ok is false when the thread has no frames.
func (s *Session) stopFrame(ctx context.Context, c *Client, stop *StopInfo) (f Frame, ok bool, err error) {
	levels := 1
	if s.looksBelowTop(stop) {
		levels = defaultMaxFrames
	}
	frames, err := s.frames(ctx, c, stop.ThreadID, levels)
	if err != nil || len(frames) == 0 {
		return Frame{}, false, err
	}
	return frames[s.focus(frames, stop)], true, nil
}
