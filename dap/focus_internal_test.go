//go:build !windows

package dap

import "testing"

func TestOwnCodeIsTheRootsFilesOutsideItsDependencies(t *testing.T) {
	for path, want := range map[string]bool{
		"/w/main.go":                                 true,
		"/w/cmd/server/main.go":                      true,
		"/w/vendored.go":                             true,
		"/w/vendor/golang.org/x/sync/errgroup.go":    false,
		"/w/node_modules/lodash/lodash.js":           false,
		"/w/web/node_modules/react/index.js":         false,
		"/w/.venv/lib/python3.11/site-packages/a.py": false,
		"/usr/lib/python3/dist-packages/b.py":        false,
		"/usr/local/go/src/runtime/panic.go":         false,
		"/wx/main.go":                                false,
		"/w":                                         true,
		"main.go":                                    false,
		"":                                           false,
	} {
		if got := ownCode("/w", path); got != want {
			t.Errorf("ownCode(/w, %q) = %v, want %v", path, got, want)
		}
	}
}

func TestFocusKeepsTheTopFrameOfABreakpointAndTakesTheWorkspacesBelowAPanic(t *testing.T) {
	frames := []Frame{{Name: "runtime.gopanic", Path: "/usr/local/go/src/runtime/panic.go"}, {Name: "main.store", Path: "/w/main.go"}, {Name: "main.main", Path: "/w/main.go"}}
	s := &Session{root: "/w"}
	for _, tc := range []struct {
		stop *StopInfo
		want int
	}{
		{&StopInfo{Reason: "exception"}, 1},
		{&StopInfo{Reason: "signal"}, 1},
		{&StopInfo{Reason: "pause"}, 1},
		{&StopInfo{Reason: "breakpoint"}, 0},
		{&StopInfo{Reason: "step"}, 0},
		{nil, 0},
	} {
		if got := s.focus(frames, tc.stop); got != tc.want {
			t.Errorf("focus for %+v = %d, want %d", tc.stop, got, tc.want)
		}
	}
	if got := s.focus(frames[:1], &StopInfo{Reason: "exception"}); got != 0 {
		t.Errorf("no frame in the workspace: focus %d, want the top", got)
	}
	core := &Session{root: "/w", core: &coreInfo{}}
	if got := core.focus(frames, &StopInfo{Reason: "entry"}); got != 1 {
		t.Errorf("a core's focus = %d, want the workspace's frame", got)
	}
}
