package mcp

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// File, search and git tools act on the bridge's root (the workspace routes
// under WorkspaceEndpoint) or, given sandbox_id, on a sandbox workspace
// (the same operations under /api/sandbox/workspaces/{id}/).

// WorkspaceEndpoint prefixes the file, search and git routes on the
// bridge's root: WorkspaceEndpoint + "/read-file", "/git/diff", ….
const WorkspaceEndpoint = "/api/workspace"

// fileRoute is the route of op on the bridge's root, or on sandbox
// workspace id when it is set.
func fileRoute(id, op string) string {
	if id == "" {
		return WorkspaceEndpoint + "/" + op
	}
	return sandboxRoute(id, op)
}

func sandboxRoute(id, op string) string {
	return bridge.SandboxWorkspacesEndpoint + "/" + url.PathEscape(id) + "/" + op
}

type readArgs struct {
	Path      string `json:"path" jsonschema:"file path relative to the workspace root"`
	StartLine int    `json:"start_line,omitempty" min:"1" jsonschema:"first line to read (1-based); default the first"`
	EndLine   int    `json:"end_line,omitempty" min:"1" jsonschema:"last line to read, inclusive; default the last"`
	MaxBytes  int    `json:"max_bytes,omitempty" min:"1" jsonschema:"read at most this many bytes; the result says when it was cut"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type writeArgs struct {
	Path       string `json:"path" jsonschema:"file path relative to the workspace root"`
	Content    string `json:"content" jsonschema:"the file's whole new content"`
	CreateDirs bool   `json:"create_dirs,omitempty" jsonschema:"create missing parent directories"`
	SandboxID  string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type replaceArgs struct {
	Path          string `json:"path" jsonschema:"file path relative to the workspace root"`
	Old           string `json:"old" jsonschema:"the exact text to replace, whitespace included; make it long enough to occur once"`
	New           string `json:"new" jsonschema:"the text to put in its place"`
	ExpectedCount int    `json:"expected_count,omitempty" min:"1" jsonschema:"how many occurrences to replace; default 1, and any other count is an error that says how many there are"`
	SandboxID     string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type listArgs struct {
	Path      string `json:"path,omitempty" default:"." jsonschema:"directory relative to the workspace root; default the root"`
	Depth     int    `json:"depth,omitempty" min:"1" max:"20" jsonschema:"how many levels to list; default 1"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type searchArgs struct {
	Pattern         string `json:"pattern" jsonschema:"regular expression to look for (or plain text with fixed)"`
	Path            string `json:"path,omitempty" jsonschema:"file or directory to search, relative to the workspace root; default the root"`
	Fixed           bool   `json:"fixed,omitempty" jsonschema:"take pattern as plain text"`
	Glob            string `json:"glob,omitempty" jsonschema:"only files matching this glob, e.g. *.go"`
	CaseInsensitive bool   `json:"case_insensitive,omitempty" jsonschema:"ignore case"`
	Context         int    `json:"context,omitempty" min:"0" max:"10" jsonschema:"lines of context around each hit (bridge root only)"`
	MaxResults      int    `json:"max_results,omitempty" min:"1" max:"10000" jsonschema:"stop after this many hits; default 1000"`
	SandboxID       string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type statusArgs struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type diffArgs struct {
	Ref       string `json:"ref,omitempty" jsonschema:"compare the working tree with this commit or branch; default HEAD (bridge root only)"`
	Staged    bool   `json:"staged,omitempty" jsonschema:"show the staged changes instead (sandbox only)"`
	Path      string `json:"path,omitempty" jsonschema:"limit the diff to this file or directory"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type commitArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox workspace (from sandbox_acquire)"`
	Message   string `json:"message" jsonschema:"the commit message"`
}

type pushArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox workspace (from sandbox_acquire)"`
	Remote    string `json:"remote,omitempty" jsonschema:"remote to push to; default origin"`
}

// ReplaceResult answers str-replace: where the first replacement starts,
// and how many were made.
type ReplaceResult struct {
	Path  string `json:"path"`
	Line  int    `json:"line"`
	Count int    `json:"count,omitempty"`
}

func addFileTools(s *Server) {
	add(s, spec{
		name:        "file_read",
		title:       "Read a file",
		description: "Read a text file, or a range of its lines, and return it with line numbers (for file_str_replace, leave the numbers out). Large files are cut: read them by line range.",
		group:       groupFiles, sandbox: true, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in readArgs) (sandbox.ReadFileResult, string, error) {
		var out sandbox.ReadFileResult
		payload := omitEmpty(map[string]any{"path": in.Path, "start_line": in.StartLine, "end_line": in.EndLine, "max_bytes": in.MaxBytes})
		err := tc.call(ctx, fileRoute(in.SandboxID, "read-file"), payload, quickCall, &out)
		return out, renderRead(in, out), err
	})
	add(s, spec{
		name:        "file_write",
		title:       "Write a file",
		description: "Create a file or replace its whole content. To change part of a file, use file_str_replace. Returns the bytes written.",
		group:       groupFiles, sandbox: true, writes: true, destructive: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in writeArgs) (sandbox.WriteFileResult, string, error) {
		var out sandbox.WriteFileResult
		payload := omitEmpty(map[string]any{"path": in.Path, "create_dirs": in.CreateDirs})
		payload["content"] = in.Content // an empty file is a file
		err := tc.call(ctx, fileRoute(in.SandboxID, "write-file"), payload, quickCall, &out)
		return out, fmt.Sprintf("Wrote %d bytes to %s.", out.Bytes, line(in.Path, maxValue)), err
	})
	add(s, spec{
		name:  "file_str_replace",
		title: "Replace text in a file",
		description: "Replace an exact piece of a file with new text. old must occur exactly once (or expected_count times); otherwise nothing changes and the error says how often it occurs. " +
			"Returns the line where the replacement starts.",
		group: groupFiles, sandbox: true, writes: true, destructive: true,
	}, func(ctx context.Context, tc *toolCall, in replaceArgs) (ReplaceResult, string, error) {
		var out ReplaceResult
		payload := omitEmpty(map[string]any{"path": in.Path, "old": in.Old, "expected_count": in.ExpectedCount})
		payload["new"] = in.New // replacing with nothing deletes
		err := tc.call(ctx, fileRoute(in.SandboxID, "str-replace"), payload, quickCall, &out)
		n := max(out.Count, 1)
		return out, fmt.Sprintf("Replaced %d occurrence%s in %s, starting at line %d.", n, plural(n), line(in.Path, maxValue), out.Line), err
	})
	add(s, spec{
		name:        "file_list",
		title:       "List a directory",
		description: "List a directory's files and subdirectories (with sizes), to the given depth; .git is left out.",
		group:       groupFiles, sandbox: true, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in listArgs) (sandbox.ListDirResult, string, error) {
		var out sandbox.ListDirResult
		payload := omitEmpty(map[string]any{"path": in.Path, "depth": in.Depth})
		err := tc.call(ctx, fileRoute(in.SandboxID, "list-dir"), payload, quickCall, &out)
		return out, renderList(in.Path, out), err
	})
	add(s, spec{
		name:        "file_search",
		title:       "Search the files",
		description: "Search the workspace's files for a regular expression or plain text (ripgrep); returns the matching lines as path:line: text.",
		group:       groupSearch, sandbox: true, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in searchArgs) (sandbox.SearchResult, string, error) {
		var out sandbox.SearchResult
		payload := omitEmpty(map[string]any{"pattern": in.Pattern, "path": in.Path, "fixed": in.Fixed, "glob": in.Glob,
			"case_insensitive": in.CaseInsensitive, "context": in.Context, "max_results": in.MaxResults})
		err := tc.call(ctx, fileRoute(in.SandboxID, "search"), payload, quickCall, &out)
		return out, renderSearch(in.Pattern, out), err
	})
	add(s, spec{
		name:        "git_status",
		title:       "Git status",
		description: "Show the git branch, HEAD commit and the changed and untracked files of the workspace.",
		group:       groupGit, sandbox: true, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in statusArgs) (sandbox.GitStatus, string, error) {
		var out sandbox.GitStatus
		err := tc.call(ctx, fileRoute(in.SandboxID, "git/status"), struct{}{}, quickCall, &out)
		return out, renderStatus(out), err
	})
	add(s, spec{
		name:        "git_diff",
		title:       "Git diff",
		description: "Show the uncommitted changes as a unified diff (against HEAD, or ref), and list the untracked files.",
		group:       groupGit, sandbox: true, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in diffArgs) (sandbox.GitDiff, string, error) {
		var out sandbox.GitDiff
		if in.SandboxID != "" && in.Ref != "" {
			return out, "", failf(protocol.CodeInvalidRequest, "leave out ref for a sandbox: its diff is against HEAD (staged for the index).", "ref is for the bridge's root only")
		}
		if in.SandboxID == "" && in.Staged {
			return out, "", failf(protocol.CodeInvalidRequest, "leave out staged on the bridge's root: give ref to diff against a commit.", "staged is for sandbox workspaces only")
		}
		payload := omitEmpty(map[string]any{"ref": in.Ref, "staged": in.Staged, "path": in.Path})
		err := tc.call(ctx, fileRoute(in.SandboxID, "git/diff"), payload, quickCall, &out)
		return out, renderDiff(out), err
	})
	add(s, spec{
		name:        "git_commit",
		title:       "Commit a sandbox's changes",
		description: "Commit every change in a sandbox workspace (added, modified, deleted, untracked) on its branch. Returns the commit.",
		sandboxOnly: true, writes: true,
	}, func(ctx context.Context, tc *toolCall, in commitArgs) (sandbox.GitCommit, string, error) {
		var out sandbox.GitCommit
		err := tc.call(ctx, sandboxRoute(in.SandboxID, "git/commit"), sandbox.CommitRequest{Message: in.Message}, quickCall, &out)
		text := fmt.Sprintf("Committed %s on %s.", line(out.Commit, maxValue), line(out.Branch, maxValue))
		if !out.Committed {
			text = fmt.Sprintf("Nothing to commit: %s is at %s.", line(out.Branch, maxValue), line(out.Commit, maxValue))
		}
		return out, text + " Next: git_push to publish the branch.", err
	})
	add(s, spec{
		name:        "git_push",
		title:       "Push a sandbox's branch",
		description: "Push a sandbox workspace's branch to its remote (origin by default).",
		sandboxOnly: true, writes: true,
	}, func(ctx context.Context, tc *toolCall, in pushArgs) (sandbox.GitPush, string, error) {
		var out sandbox.GitPush
		tc.wait("pushing")
		err := tc.call(ctx, sandboxRoute(in.SandboxID, "git/push"), sandbox.PushRequest{Remote: in.Remote}, defaultTimeout, &out)
		return out, fmt.Sprintf("Pushed %s (%s) to %s.", line(out.Branch, maxValue), line(out.Commit, maxValue), line(out.Remote, maxValue)), err
	})
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// maxLines caps the lines of a file shown at once.
const maxLines = 2000

func renderRead(in readArgs, r sandbox.ReadFileResult) string {
	var b strings.Builder
	if r.Encoding == sandbox.EncodingBase64 {
		fmt.Fprintf(&b, "%s is binary (%d bytes); the structured result has it base64-encoded.", line(r.Path, maxValue), r.Size)
		return b.String()
	}
	first := max(in.StartLine, 1)
	lines := strings.SplitAfter(r.Content, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	last := first + len(lines) - 1
	fmt.Fprintf(&b, "%s", line(r.Path, maxValue))
	if len(lines) == 0 {
		b.WriteString(": (empty)")
	} else if r.TotalLines > 0 {
		fmt.Fprintf(&b, " lines %d-%d of %d", first, last, r.TotalLines)
	} else {
		fmt.Fprintf(&b, " lines %d-%d", first, last)
	}
	b.WriteString(":\n")
	size := 0
	for i, l := range lines {
		if i == maxLines || size > maxOutput {
			fmt.Fprintf(&b, "… %d more lines: call file_read with start_line %d.\n", len(lines)-i, first+i)
			return b.String()
		}
		text := block(strings.TrimSuffix(l, "\n"), maxValue*4)
		size += len(text)
		fmt.Fprintf(&b, "%6d\t%s\n", first+i, strings.ReplaceAll(text, "\n", `\n`))
	}
	if r.Truncated {
		fmt.Fprintf(&b, "… the file goes on (cut at %d bytes): call file_read with start_line %d.\n", len(r.Content), last+1)
	}
	return b.String()
}

// maxEntries caps the entries of a listing shown.
const maxEntries = 500

func renderList(dir string, r sandbox.ListDirResult) string {
	var b strings.Builder
	if dir == "" {
		dir = "."
	}
	fmt.Fprintf(&b, "%s: %d entries\n", line(dir, maxValue), len(r.Entries))
	for i, e := range r.Entries {
		if i == maxEntries {
			fmt.Fprintf(&b, "… %d more (the structured result lists them all)\n", len(r.Entries)-i)
			break
		}
		switch e.Type {
		case "dir":
			fmt.Fprintf(&b, "%s/\n", line(e.Path, maxValue))
		case "file":
			fmt.Fprintf(&b, "%s  %d B\n", line(e.Path, maxValue), e.Size)
		default:
			fmt.Fprintf(&b, "%s  (%s)\n", line(e.Path, maxValue), line(e.Type, maxValue))
		}
	}
	if r.Truncated {
		b.WriteString("The listing was cut: list a subdirectory, or with a smaller depth.\n")
	}
	return b.String()
}

// maxHits caps the search hits shown.
const maxHits = 300

func renderSearch(pattern string, r sandbox.SearchResult) string {
	var b strings.Builder
	if len(r.Hits) == 0 {
		fmt.Fprintf(&b, "No match for %s.", line(pattern, maxValue))
		return b.String()
	}
	fmt.Fprintf(&b, "%d match%s for %s:\n", len(r.Hits), pluralES(len(r.Hits)), line(pattern, maxValue))
	for i, h := range r.Hits {
		if i == maxHits {
			fmt.Fprintf(&b, "… %d more (the structured result lists them all)\n", len(r.Hits)-i)
			break
		}
		fmt.Fprintf(&b, "%s:%d: %s\n", line(h.Path, maxValue), h.Line, line(h.Text, maxValue))
	}
	if r.Truncated {
		b.WriteString("There are more matches: narrow the pattern, path or glob, or raise max_results.\n")
	}
	return b.String()
}

func pluralES(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}

func renderStatus(r sandbox.GitStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "On branch %s at %s", line(r.Branch, maxValue), line(shortHash(r.Head), maxValue))
	if r.Clean || len(r.Entries) == 0 {
		b.WriteString(": clean.")
		return b.String()
	}
	fmt.Fprintf(&b, ", %d changed:\n", len(r.Entries))
	for i, e := range r.Entries {
		if i == maxEntries {
			fmt.Fprintf(&b, "… %d more\n", len(r.Entries)-i)
			break
		}
		fmt.Fprintf(&b, "%s %s\n", line(e.Status, 4), line(e.Path, maxValue))
	}
	return b.String()
}

func renderDiff(r sandbox.GitDiff) string {
	var b strings.Builder
	if r.Diff == "" {
		b.WriteString("No changes to tracked files.")
	} else {
		b.WriteString(block(r.Diff, maxOutput))
		if r.Truncated {
			b.WriteString("\n(the diff was cut: diff one path at a time)")
		}
	}
	if len(r.Untracked) > 0 {
		b.WriteString("\nUntracked files:")
		for i, p := range r.Untracked {
			if i == maxEntries {
				fmt.Fprintf(&b, "\n… %d more", len(r.Untracked)-i)
				break
			}
			b.WriteString("\n  " + line(p, maxValue))
		}
	}
	return b.String()
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
