//go:build !windows

package dap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// TestLineContentBadInputAnswersBeforeStarting: every line/line_content
// mistake is answered with a coded error naming the field or the text, and
// before any adapter is looked for (the PATH here has none).
func TestLineContentBadInputAnswersBeforeStarting(t *testing.T) {
	root := t.TempDir()
	src, _ := os.ReadFile("testdata/add_numbers.c")
	if err := os.WriteFile(filepath.Join(root, "add_numbers.c"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.c")
	_ = os.WriteFile(outside, src, 0o644)
	if err := os.Symlink(outside, filepath.Join(root, "link.c")); err != nil {
		t.Fatal(err)
	}
	m, err := dap.NewManager(dap.Config{Root: root, Path: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := ctxFor(t, 10*time.Second)
	for _, tc := range []struct {
		name string
		path string
		bp   dap.SourceBreakpoint
		code string
		want []string
	}{
		{"neither", "add_numbers.c", dap.SourceBreakpoint{}, protocol.CodeInvalidPayload, []string{"breakpoints[0].breakpoints[0]", "line or line_content"}},
		{"both", "add_numbers.c", dap.SourceBreakpoint{Line: 4, LineContent: "return sum;"}, protocol.CodeInvalidPayload, []string{"not both"}},
		{"negative line", "add_numbers.c", dap.SourceBreakpoint{Line: -1}, protocol.CodeInvalidPayload, []string{"breakpoints[0].breakpoints[0].line"}},
		{"blank text", "add_numbers.c", dap.SourceBreakpoint{LineContent: "  \t"}, protocol.CodeInvalidPayload, []string{"line_content is blank"}},
		{"occurrence with line", "add_numbers.c", dap.SourceBreakpoint{Line: 4, Occurrence: 1}, protocol.CodeInvalidPayload, []string{"occurrence goes with line_content"}},
		{"no match", "add_numbers.c", dap.SourceBreakpoint{LineContent: "return product;"}, protocol.CodeInvalidPayload, []string{`"return product;"`, "add_numbers.c"}},
		{"ambiguous", "add_numbers.c", dap.SourceBreakpoint{LineContent: "return"}, protocol.CodeInvalidPayload, []string{"lines 4, 11", "occurrence"}},
		{"occurrence past the matches", "add_numbers.c", dap.SourceBreakpoint{LineContent: "return", Occurrence: 3}, protocol.CodeInvalidPayload, []string{"only 2 lines", "lines 4, 11"}},
		{"missing file", "nope.c", dap.SourceBreakpoint{LineContent: "x"}, protocol.CodeInvalidPath, []string{"nope.c"}},
		{"outside the root", outside, dap.SourceBreakpoint{LineContent: "return sum;"}, protocol.CodeInvalidPath, []string{"inside the workspace"}},
		{"symlink out of the root", "link.c", dap.SourceBreakpoint{LineContent: "return sum;"}, protocol.CodeInvalidPath, []string{"link.c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "add_numbers",
				Breakpoints: []dap.FileBreakpoints{{Path: tc.path, Breakpoints: []dap.SourceBreakpoint{tc.bp}}}})
			if code(err) != tc.code {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestLineContentResolvesForStartAndSetBreakpoints: a breakpoint by text
// binds at the line it names, at start and later, and its answer reports
// that line; an exact match wins over lines merely containing the text.
func TestLineContentResolvesForStartAndSetBreakpoints(t *testing.T) {
	root := cWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	ctx := ctxFor(t, 60*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "c", Program: "add_numbers",
		Breakpoints: []dap.FileBreakpoints{{Path: "add_numbers.c", Breakpoints: []dap.SourceBreakpoint{{LineContent: "  return sum;  "}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(start.Breakpoints) != 1 || start.Breakpoints[0].Line != 4 || !start.Breakpoints[0].Verified {
		t.Fatalf("start breakpoints = %+v, want one verified at line 4", start.Breakpoints)
	}
	s, _ := m.Session(start.SessionID)
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Frames[0].Line != 4 {
		t.Fatalf("stopped at %+v, want line 4", snap.Frames[0])
	}
	// Only line 10 contains "printf"; "return" is in lines 4 and 11.
	bps, err := s.SetBreakpoints(ctx, dap.SetBreakpointsRequest{Path: filepath.Join(root, "add_numbers.c"),
		Breakpoints: []dap.SourceBreakpoint{{LineContent: "printf"}, {LineContent: "return", Occurrence: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(bps.Breakpoints) != 2 || bps.Breakpoints[0].Line != 10 || bps.Breakpoints[1].Line != 4 {
		t.Fatalf("set-breakpoints = %+v, want lines 10 and 4", bps.Breakpoints)
	}
	if _, err := s.SetBreakpoints(ctx, dap.SetBreakpointsRequest{Path: "add_numbers.c",
		Breakpoints: []dap.SourceBreakpoint{{LineContent: "sum"}}}); code(err) != protocol.CodeInvalidPayload || !strings.Contains(err.Error(), "lines 3, 4") {
		t.Fatalf("ambiguous set-breakpoints: %v, want invalid_payload listing lines 3, 4", err)
	}
	ctl, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{Wait: new(true)})
	if err != nil || ctl.Location == nil || ctl.Location.Line != 4 {
		t.Fatalf("continue = %+v, %v; want the second add_numbers call at line 4", ctl, err)
	}
}
