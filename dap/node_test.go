//go:build !windows

package dap_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
)

// nodeWorkspace copies dap/node's test programs into a temp root.
func nodeWorkspace(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("node/testdata/programs", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestNodeSessionThroughManager: the built-in Node adapter behind the
// Manager, with a breakpoint given by its line's text: it binds before the
// program runs and the snapshot has parameters, locals and the closure.
func TestNodeSessionThroughManager(t *testing.T) {
	root := nodeWorkspace(t, "calc.js")
	m := newManager(t, root)
	needAdapter(t, m, "node")
	ctx := ctxFor(t, 30*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "javascript", Program: "calc.js",
		Breakpoints: []dap.FileBreakpoints{{Path: "calc.js", Breakpoints: []dap.SourceBreakpoint{{LineContent: "return r;"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if start.Adapter != "node" || len(start.Breakpoints) != 1 || !start.Breakpoints[0].Verified || start.Breakpoints[0].Line != 6 {
		t.Fatalf("start = %+v, want node with one verified breakpoint at line 6", start)
	}
	s, _ := m.Session(start.SessionID)
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{Expressions: []string{"p * q"}})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stop.Reason != "breakpoint" || snap.Frames[0].Name != "mul" || snap.Frames[0].Line != 6 {
		t.Fatalf("stop %+v at %+v, want the breakpoint in mul:6", snap.Stop, snap.Frames[0])
	}
	for name, want := range map[string]string{"p": "0", "q": "2", "r": "10"} {
		if got := local(t, snap.Locals, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if len(snap.Scopes) < 2 || snap.Scopes[1].Name != "Closure" || local(t, snap.Scopes[1].Variables, "k") != "10" {
		t.Errorf("scopes %+v, want the closure with k = 10", snap.Scopes)
	}
	if len(snap.Expressions) != 1 || snap.Expressions[0].Result != "0" {
		t.Errorf("p * q = %+v, want 0", snap.Expressions)
	}
	if res, err := m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID}); err != nil || res.State != dap.StateEnded {
		t.Fatalf("stop = %+v, %v", res, err)
	}
	if left := descendants(); len(left) != 0 {
		t.Fatalf("left after stop-session: %q", left)
	}
}
