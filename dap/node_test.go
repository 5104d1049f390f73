package dap_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
)

// nodeWorkspace copies testdata/node files into a temp root.
func nodeWorkspace(t *testing.T, names ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata/node", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestNodeCommonJSBreakpointSnapshot(t *testing.T) {
	root := nodeWorkspace(t, "calc.js")
	m := newManager(t, root)
	needAdapter(t, m, "node")
	ctx := ctxFor(t, 30*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "javascript", Program: "calc.js",
		Breakpoints: []dap.FileBreakpoints{{Path: "calc.js", Breakpoints: []dap.SourceBreakpoint{{Line: 6}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start %+v", start)
	s, _ := m.Session(start.SessionID)
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{Expressions: []string{"p * q"}, VariableDepth: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stop %+v frames %+v", snap.Stop, snap.Frames)
	t.Logf("scopes %+v", snap.Scopes)
	t.Logf("locals %+v expr %+v", snap.Locals, snap.Expressions)
	out := s.Output(0)
	t.Logf("output %q", out.Output)
}
