package mcp

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// File, search and git tools act on the bridge's root (the workspace
// routes, protocol.Workspace…Endpoint) or, given sandbox_id, on a sandbox
// workspace: the same operations, with the same payloads (both run
// sandbox.Tree), under /api/sandbox/workspaces/{id}/.

// fileRoute is the route of the root's endpoint, or of the same operation
// on sandbox workspace id when it is set.
func fileRoute(id, endpoint string) string {
	if id == "" {
		return endpoint
	}
	return sandboxRoute(id, protocol.WorkspaceOp(endpoint))
}

// fileRoutes are the route patterns of a file tool: on the root, and in
// sandboxes.
func fileRoutes(endpoint string) []string {
	return []string{endpoint, sandboxPattern(protocol.WorkspaceOp(endpoint))}
}

func sandboxRoute(id, op string) string {
	return protocol.SandboxWorkspacesEndpoint + "/" + url.PathEscape(id) + "/" + op
}

// sandboxPattern is the route pattern of sandboxRoute, as capabilities
// lists it.
func sandboxPattern(op string) string { return protocol.SandboxWorkspacesEndpoint + "/:id/" + op }

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
	CreateDirs *bool  `json:"create_dirs,omitempty" jsonschema:"create missing parent directories (default true); false makes a missing parent an error"`
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
	Context         int    `json:"context,omitempty" min:"0" max:"10" jsonschema:"lines of context before and after each hit"`
	MaxResults      int    `json:"max_results,omitempty" min:"1" max:"10000" jsonschema:"stop after this many hits; default 1000"`
	SandboxID       string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type statusArgs struct {
	Path      string `json:"path,omitempty" jsonschema:"limit the status to this file or directory"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"act on this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

type diffArgs struct {
	Ref       string `json:"ref,omitempty" jsonschema:"compare with this commit, branch or tag (HEAD~2 works too); default HEAD"`
	Staged    bool   `json:"staged,omitempty" jsonschema:"show the staged changes (the index) instead of the working tree's"`
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

func addFileTools(s *Server) {
	add(s, spec{
		name:        "file_read",
		title:       "Read a file",
		description: "Read a text file, or a range of its lines, and return it with line numbers (for file_str_replace, leave the numbers out). Large files are cut: read them by line range.",
		routes:      fileRoutes(protocol.WorkspaceReadFileEndpoint), readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in readArgs) (sandbox.ReadFileResult, string, error) {
		var out sandbox.ReadFileResult
		req := sandbox.ReadFileRequest{Path: in.Path, StartLine: in.StartLine, EndLine: in.EndLine, MaxBytes: in.MaxBytes}
		err := tc.call(ctx, fileRoute(in.SandboxID, protocol.WorkspaceReadFileEndpoint), req, quickCall, &out)
		return out, renderRead(out), err
	})
	add(s, spec{
		name:        "file_write",
		title:       "Write a file",
		description: "Create a file or replace its whole content. To change part of a file, use file_str_replace. Returns the bytes written.",
		routes:      fileRoutes(protocol.WorkspaceWriteFileEndpoint), destructive: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in writeArgs) (sandbox.WriteFileResult, string, error) {
		var out sandbox.WriteFileResult
		req := sandbox.WriteFileRequest{Path: in.Path, Content: in.Content, CreateDirs: in.CreateDirs}
		err := tc.call(ctx, fileRoute(in.SandboxID, protocol.WorkspaceWriteFileEndpoint), req, quickCall, &out)
		how := "Wrote"
		if out.Created {
			how = "Created"
		}
		return out, fmt.Sprintf("%s %s (%d bytes).", how, line(in.Path, maxValue), out.Bytes), err
	})
	add(s, spec{
		name:  "file_str_replace",
		title: "Replace text in a file",
		description: "Replace an exact piece of a file with new text. old must occur exactly once (or expected_count times); otherwise nothing changes and the error says how often it occurs. " +
			"Returns the line where the replacement starts.",
		routes: fileRoutes(protocol.WorkspaceStrReplaceEndpoint), destructive: true,
	}, func(ctx context.Context, tc *toolCall, in replaceArgs) (sandbox.StrReplaceResult, string, error) {
		var out sandbox.StrReplaceResult
		req := sandbox.StrReplaceRequest{Path: in.Path, Old: in.Old, New: in.New, ExpectedCount: in.ExpectedCount}
		err := tc.call(ctx, fileRoute(in.SandboxID, protocol.WorkspaceStrReplaceEndpoint), req, quickCall, &out)
		n := out.Replacements
		return out, fmt.Sprintf("Replaced %d occurrence%s in %s, the first at line %d.", n, plural(n), line(in.Path, maxValue), out.Line), err
	})
	add(s, spec{
		name:        "file_list",
		title:       "List a directory",
		description: "List a directory's files and subdirectories (with sizes), to the given depth; .git is left out.",
		routes:      fileRoutes(protocol.WorkspaceListDirEndpoint), readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in listArgs) (sandbox.ListDirResult, string, error) {
		var out sandbox.ListDirResult
		req := sandbox.ListDirRequest{Path: in.Path, Depth: in.Depth}
		err := tc.call(ctx, fileRoute(in.SandboxID, protocol.WorkspaceListDirEndpoint), req, quickCall, &out)
		return out, renderList(in.Path, out), err
	})
	add(s, spec{
		name:        "file_search",
		title:       "Search the files",
		description: "Search the workspace's files for a regular expression or plain text (ripgrep); returns the matching lines as path:line: text.",
		routes:      fileRoutes(protocol.WorkspaceSearchEndpoint), readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in searchArgs) (sandbox.SearchResult, string, error) {
		var out sandbox.SearchResult
		req := sandbox.SearchRequest{Pattern: in.Pattern, Path: in.Path, Fixed: in.Fixed, Glob: in.Glob,
			CaseInsensitive: in.CaseInsensitive, Context: in.Context, MaxResults: in.MaxResults}
		err := tc.call(ctx, fileRoute(in.SandboxID, protocol.WorkspaceSearchEndpoint), req, quickCall, &out)
		return out, renderSearch(in.Pattern, out), err
	})
	add(s, spec{
		name:        "git_status",
		title:       "Git status",
		description: "Show the git branch, HEAD commit and the changed and untracked files of the workspace.",
		routes:      fileRoutes(protocol.WorkspaceGitStatusEndpoint), readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in statusArgs) (sandbox.GitStatus, string, error) {
		var out sandbox.GitStatus
		err := tc.call(ctx, fileRoute(in.SandboxID, protocol.WorkspaceGitStatusEndpoint), sandbox.StatusRequest{Path: in.Path}, quickCall, &out)
		return out, renderStatus(out), err
	})
	add(s, spec{
		name:        "git_diff",
		title:       "Git diff",
		description: "Show the uncommitted changes as a unified diff (against HEAD, or ref), and list the untracked files.",
		routes:      fileRoutes(protocol.WorkspaceGitDiffEndpoint), readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in diffArgs) (sandbox.GitDiff, string, error) {
		var out sandbox.GitDiff
		req := sandbox.DiffRequest{Ref: in.Ref, Staged: in.Staged, Path: in.Path}
		err := tc.call(ctx, fileRoute(in.SandboxID, protocol.WorkspaceGitDiffEndpoint), req, quickCall, &out)
		return out, renderDiff(out), err
	})
	add(s, spec{
		name:        "git_commit",
		title:       "Commit a sandbox's changes",
		description: "Commit every change in a sandbox workspace (added, modified, deleted, untracked) on its branch. Returns the commit.",
		routes:      []string{sandboxPattern(protocol.SandboxGitCommitOp)},
	}, func(ctx context.Context, tc *toolCall, in commitArgs) (sandbox.GitCommit, string, error) {
		var out sandbox.GitCommit
		err := tc.call(ctx, sandboxRoute(in.SandboxID, protocol.SandboxGitCommitOp), sandbox.CommitRequest{Message: in.Message}, quickCall, &out)
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
		routes:      []string{sandboxPattern(protocol.SandboxGitPushOp)},
	}, func(ctx context.Context, tc *toolCall, in pushArgs) (sandbox.GitPush, string, error) {
		var out sandbox.GitPush
		tc.wait("pushing")
		err := tc.call(ctx, sandboxRoute(in.SandboxID, protocol.SandboxGitPushOp), sandbox.PushRequest{Remote: in.Remote}, defaultTimeout, &out)
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

func renderRead(r sandbox.ReadFileResult) string {
	var b strings.Builder
	if r.Encoding == sandbox.EncodingBase64 {
		fmt.Fprintf(&b, "%s is not text (%d bytes); the structured result has it base64-encoded.", line(r.Path, maxValue), r.Size)
		return b.String()
	}
	lines := strings.SplitAfter(r.Content, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	first := max(r.StartLine, 1)
	fmt.Fprintf(&b, "%s", line(r.Path, maxValue))
	switch {
	case len(lines) == 0:
		b.WriteString(": (empty)")
	case r.TotalLines > 0:
		fmt.Fprintf(&b, " lines %d-%d of %d", first, first+len(lines)-1, r.TotalLines)
	default:
		fmt.Fprintf(&b, " lines %d-%d", first, first+len(lines)-1)
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
		fmt.Fprintf(&b, "… the file goes on: call file_read with start_line %d.\n", first+len(lines))
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
		for j, c := range h.Before {
			fmt.Fprintf(&b, "%s-%d- %s\n", line(h.Path, maxValue), h.Line-len(h.Before)+j, line(c, maxValue))
		}
		fmt.Fprintf(&b, "%s:%d: %s\n", line(h.Path, maxValue), h.Line, line(h.Text, maxValue))
		for j, c := range h.After {
			fmt.Fprintf(&b, "%s-%d- %s\n", line(h.Path, maxValue), h.Line+1+j, line(c, maxValue))
		}
		if len(h.Before)+len(h.After) > 0 {
			b.WriteString("--\n")
		}
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
