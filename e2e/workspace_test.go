package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/gittest"
	"github.com/tetherdev/tether/protocol"
)

// workspaceRepo makes a git repository with main.go committed on main, a
// symlink "out" leading to a directory outside it, and returns the
// repository and the outside directory.
func workspaceRepo(t *testing.T) (root, outside string) {
	t.Helper()
	root = gittest.Repo(t, map[string]string{"main.go": "package main\n\nconst Answer = 42\n\nfunc main() {}\n"})
	outside = t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOPSECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

// refused checks that resp is a failure with code whose message says want.
func refused(t *testing.T, what string, resp protocol.ToolResponse, code, want string) {
	t.Helper()
	if resp.Success || resp.Error != code || !strings.Contains(resp.Message, want) {
		t.Fatalf("%s: %+v, want %s saying %q", what, resp, code, want)
	}
}

func TestWorkspaceFilesThroughBrokerAndBridge(t *testing.T) {
	root, _ := workspaceRepo(t)
	b := startBroker(t)
	ws := "ws-files"
	startBridge(t, b, ws, "--root", root)
	c := &routeCaller{t: t, b: b, ws: ws, tok: token(t, auth.RoleCaller, ws)}

	var caps struct {
		Root     string   `json:"root"`
		ReadOnly bool     `json:"read_only"`
		Groups   []string `json:"groups"`
	}
	c.ok("/api/workspace/capabilities", nil, &caps)
	if caps.ReadOnly || strings.Join(caps.Groups, ",") != "terminal,debug,files,git" {
		t.Fatalf("capabilities: %+v", caps)
	}

	var read struct {
		Content    string `json:"content"`
		TotalLines int    `json:"total_lines"`
		StartLine  int    `json:"start_line"`
		EndLine    int    `json:"end_line"`
		Truncated  bool   `json:"truncated"`
	}
	c.ok("/api/workspace/read-file", map[string]any{"path": "main.go", "line_numbers": true, "start_line": 3, "end_line": 3}, &read)
	if read.Content != "     3\tconst Answer = 42\n" || read.TotalLines != 5 || read.StartLine != 3 || read.EndLine != 3 {
		t.Fatalf("read-file with line numbers: %+v", read)
	}

	var rep struct {
		Replacements int `json:"replacements"`
		Line         int `json:"line"`
	}
	c.ok("/api/workspace/str-replace", map[string]any{"path": "main.go", "old": "Answer = 42", "new": "Answer = 43"}, &rep)
	if rep.Replacements != 1 || rep.Line != 3 {
		t.Fatalf("str-replace: %+v", rep)
	}
	refused(t, "str-replace of text that is gone", c.call("/api/workspace/str-replace", map[string]any{"path": "main.go", "old": "Answer = 42", "new": "x"}),
		protocol.CodeNoMatch, "0 times")

	var found struct {
		Hits []struct {
			Path string `json:"path"`
			Line int    `json:"line"`
		} `json:"hits"`
		Rendered string `json:"rendered"`
	}
	c.ok("/api/workspace/search", map[string]any{"pattern": `Answer = \d+`}, &found)
	if len(found.Hits) != 1 || found.Hits[0].Path != "main.go" || found.Rendered != "main.go:3: const Answer = 43\n" {
		t.Fatalf("search after the edit: %+v", found)
	}

	var diff struct {
		Diff string `json:"diff"`
	}
	c.ok("/api/workspace/git/diff", map[string]any{}, &diff)
	if !strings.Contains(diff.Diff, "-const Answer = 42") || !strings.Contains(diff.Diff, "+const Answer = 43") {
		t.Fatalf("git diff: %q", diff.Diff)
	}
	var status struct {
		Branch  string `json:"branch"`
		Entries []struct {
			Status string `json:"status"`
			Path   string `json:"path"`
		} `json:"entries"`
	}
	c.ok("/api/workspace/git/status", nil, &status)
	if status.Branch != "main" || len(status.Entries) != 2 { // main.go modified, out untracked
		t.Fatalf("git status: %+v", status)
	}

	// Escapes, by name and through a symlink, answer invalid_path.
	for _, p := range []string{"../main.go", "out/secret.txt", "/etc/passwd"} {
		resp := c.call("/api/workspace/read-file", map[string]any{"path": p})
		refused(t, "read-file "+p, resp, protocol.CodeInvalidPath, "")
		if strings.Contains(resp.Message, "TOPSECRET") {
			t.Fatalf("the refusal leaks the file: %q", resp.Message)
		}
	}
	refused(t, "write through the symlink", c.call("/api/workspace/write-file", map[string]any{"path": "out/planted", "content": "x"}),
		protocol.CodeInvalidPath, "outside")
	refused(t, "an unknown field", c.call("/api/workspace/read-file", map[string]any{"path": "main.go", "lines": 3}),
		protocol.CodeInvalidPayload, `"lines"`)

	// A big file gets one answer, capped.
	big := strings.Repeat("0123456789abcdef\n", 300_000) // 5.1 MB
	if err := os.WriteFile(filepath.Join(root, "big.log"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	var capped struct {
		Content    string `json:"content"`
		Size       int64  `json:"size"`
		TotalLines int    `json:"total_lines"`
		Truncated  bool   `json:"truncated"`
	}
	c.ok("/api/workspace/read-file", map[string]any{"path": "big.log"}, &capped)
	if !capped.Truncated || len(capped.Content) > 256<<10 || capped.Size != int64(len(big)) || capped.TotalLines != 300_000 {
		t.Fatalf("big file: truncated %v, %d bytes, size %d, lines %d", capped.Truncated, len(capped.Content), capped.Size, capped.TotalLines)
	}
}

func TestWorkspaceReadOnlyBridgeRefusesWritesAndCommands(t *testing.T) {
	root, _ := workspaceRepo(t)
	b := startBroker(t)
	ws := "ws-readonly"
	startBridge(t, b, ws, "--root", root, "--read-only")
	c := &routeCaller{t: t, b: b, ws: ws, tok: token(t, auth.RoleCaller, ws)}

	refused(t, "write-file", c.call("/api/workspace/write-file", map[string]any{"path": "new.txt", "content": "x"}), protocol.CodeForbidden, "--read-only")
	refused(t, "str-replace", c.call("/api/workspace/str-replace", map[string]any{"path": "main.go", "old": "42", "new": "43"}), protocol.CodeForbidden, "--read-only")
	refused(t, "terminal", c.call("/api/terminal/execute", map[string]any{"command": "touch ran"}), protocol.CodeForbidden, "--read-only")
	for _, name := range []string{"new.txt", "ran"} {
		if _, err := os.Stat(filepath.Join(root, name)); !os.IsNotExist(err) {
			t.Fatalf("%s exists: the read-only bridge wrote or ran something", name)
		}
	}
	var read struct {
		Content string `json:"content"`
	}
	c.ok("/api/workspace/read-file", map[string]any{"path": "main.go"}, &read)
	if !strings.Contains(read.Content, "Answer = 42") {
		t.Fatalf("read-file: %+v", read)
	}
	var caps struct {
		ReadOnly bool     `json:"read_only"`
		Routes   []string `json:"routes"`
	}
	c.ok("/api/workspace/capabilities", nil, &caps)
	if !caps.ReadOnly || slices.Contains(caps.Routes, "/api/workspace/write-file") || slices.Contains(caps.Routes, "/api/terminal/execute") ||
		!slices.Contains(caps.Routes, "/api/workspace/git/diff") {
		t.Fatalf("capabilities: %+v", caps)
	}
}

func TestWorkspaceDisabledGroupIsRefused(t *testing.T) {
	root, _ := workspaceRepo(t)
	b := startBroker(t)
	ws := "ws-disabled"
	startBridge(t, b, ws, "--root", root, "--disable", "git,debug")
	c := &routeCaller{t: t, b: b, ws: ws, tok: token(t, auth.RoleCaller, ws)}

	refused(t, "git diff", c.call("/api/workspace/git/diff", nil), protocol.CodeForbidden, "--disable git")
	refused(t, "debug", c.call("/api/debug/list-sessions", nil), protocol.CodeForbidden, "--disable debug")
	c.ok("/api/workspace/read-file", map[string]any{"path": "main.go"}, nil)
	var caps struct {
		Groups   []string `json:"groups"`
		Disabled []string `json:"disabled"`
	}
	c.ok("/api/workspace/capabilities", nil, &caps)
	if strings.Join(caps.Groups, ",") != "terminal,files" || strings.Join(caps.Disabled, ",") != "debug,git" {
		t.Fatalf("capabilities: %+v", caps)
	}
}
