package sandbox

// The wire shapes of the sandbox routes: what a caller sends and gets back
// (package mcp decodes them). Pure Go, built on every platform, while the
// package's workings are Unix-only.

import "time"

// AcquireRequest is the payload of /api/sandbox/workspaces.
type AcquireRequest struct {
	Repo           string `json:"repo"`
	BaseRef        string `json:"base_ref,omitempty"`
	Mode           string `json:"mode"`
	UserID         string `json:"user_id"`
	ProjectID      string `json:"project_id"`
	ConversationID string `json:"conversation_id,omitempty"`
	TaskID         string `json:"task_id,omitempty"`
	// AuthToken is used for this acquire's clone or fetch only; it is
	// never stored.
	AuthToken string `json:"auth_token,omitempty"`
	// Runtime is "subprocess", "bwrap" or "container" (where the bridge
	// offers it); default Config.DefaultRuntime.
	Runtime string `json:"runtime,omitempty"`
	// Network is "none" or "host"; default "none" for bwrap and
	// container, "host" for subprocess.
	Network string `json:"network,omitempty"`
	// Container configures the container runtime; any other runtime
	// refuses it. Given on a re-acquire, it replaces the workspace's
	// options (and its container, at the next command).
	Container *ContainerOptions `json:"container,omitempty"`
	// Pinned keeps the workspace from eviction.
	Pinned *bool `json:"pinned,omitempty"`
}

// ContainerOptions configure a workspace's container (runtime
// "container"). Zero values mean the bridge's defaults: its image, no CPU,
// memory or process limit, the worktree owner's uid:gid.
type ContainerOptions struct {
	// Image is the image commands run in. It must be on the engine
	// already: nothing is pulled.
	Image string `json:"image,omitempty"`
	// CPUs bounds the CPU time, in CPUs (1.5 is one and a half); at most
	// the machine's CPU count.
	CPUs float64 `json:"cpus,omitempty"`
	// Memory bounds the container's memory: bytes, or a number with the
	// suffix k, m or g (powers of 1024): "512m". At least 6m.
	Memory string `json:"memory,omitempty"`
	// Pids bounds the processes and threads alive at once; at least 16.
	Pids int64 `json:"pids,omitempty"`
	// Env is set in every command's environment (a command's own env
	// wins). Nothing of tether's environment reaches the container.
	Env map[string]string `json:"env,omitempty"`
	// User is "uid:gid", numeric; default the worktree owner's, so files
	// written inside belong to the host user who owns the worktree.
	User string `json:"user,omitempty"`
}

// AcquireResult answers acquire.
type AcquireResult struct {
	WorkspaceID string `json:"workspace_id"`
	Mode        string `json:"mode"`
	Branch      string `json:"branch"`
	BaseRef     string `json:"base_ref"`
	BaseCommit  string `json:"base_commit"`
	Runtime     string `json:"runtime"`
	Network     string `json:"network"`
	// Container is the workspace's container options (runtime container).
	Container    *ContainerOptions `json:"container,omitempty"`
	Capabilities Capabilities      `json:"capabilities"`
	// Created: this call made the worktree; false when it already existed.
	Created bool `json:"created"`
	// Path is the worktree on the machine serving the sandbox.
	Path string `json:"path"`
	// Artifact is the patch saved when an earlier worktree of this key was
	// evicted dirty.
	Artifact string `json:"artifact,omitempty"`
}

// GitStatus answers git/status.
type GitStatus struct {
	Branch string `json:"branch"`
	Head   string `json:"head"`
	Clean  bool   `json:"clean"`
	// Entries are `git status --porcelain` lines split into the two-letter
	// status and the path.
	Entries []StatusEntry `json:"entries"`
}

// StatusRequest is the payload of git/status.
type StatusRequest struct {
	// Path limits the status to a file or directory.
	Path string `json:"path,omitempty"`
}

// DiffRequest is the payload of git/diff.
type DiffRequest struct {
	// Ref is what the diff is against: HEAD (the default), a branch, a
	// tag or a commit id, optionally followed by ~N or ^N.
	Ref string `json:"ref,omitempty"`
	// Staged shows the index against Ref instead of the worktree against
	// Ref.
	Staged bool `json:"staged,omitempty"`
	// Path limits the diff to one file or directory.
	Path string `json:"path,omitempty"`
}

// GitDiff answers git/diff: the diff of tracked files against the ref,
// capped at 256 KiB, and the untracked files (not in the diff).
type GitDiff struct {
	Diff      string   `json:"diff"`
	Untracked []string `json:"untracked"`
	Truncated bool     `json:"truncated"`
}

// GitCommit answers git/commit.
type GitCommit struct {
	Commit    string `json:"commit"`
	Branch    string `json:"branch"`
	Committed bool   `json:"committed"`
	Message   string `json:"message,omitempty"`
}

// GitPush answers git/push.
type GitPush struct {
	Remote string `json:"remote"`
	Branch string `json:"branch"`
	Commit string `json:"commit"`
}

// Defaults of the file operations.
const (
	// DefaultReadCap bounds the content of one read-file: with JSON's
	// escapes, an answer must fit the broker's default maxPayload (1 MB).
	DefaultReadCap    = 256 << 10
	maxListEntries    = 5000
	EncodingBase64    = "base64"
	defaultListDepth  = 1
	maxListDepth      = 20
	maxWriteFileBytes = 32 << 20
)

// WriteFileRequest is the payload of write-file: the file's whole new
// content, at most 32 MiB.
type WriteFileRequest struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Encoding "base64" decodes Content first; default text.
	Encoding string `json:"encoding,omitempty"`
	// CreateDirs creates missing parent directories; default true. With
	// false, a missing parent answers invalid_path.
	CreateDirs *bool `json:"create_dirs,omitempty"`
}

// WriteFileResult answers write-file.
type WriteFileResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
	// Created: the file did not exist before.
	Created bool `json:"created"`
}

// StrReplaceRequest is the payload of str-replace: every exact occurrence
// of Old becomes New, provided there are ExpectedCount of them (default
// 1). None answers no_match; another number answers ambiguous_match; the
// message gives the count either way, and the file is left as it was.
type StrReplaceRequest struct {
	Path          string `json:"path"`
	Old           string `json:"old"`
	New           string `json:"new"`
	ExpectedCount int    `json:"expected_count,omitempty"`
}

// StrReplaceResult answers str-replace.
type StrReplaceResult struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
	Line         int    `json:"line"` // where the first occurrence of Old started
}

// ListDirRequest is the payload of list-dir.
type ListDirRequest struct {
	Path  string `json:"path"`
	Depth int    `json:"depth,omitempty"` // default 1
}

// ListDirResult answers list-dir.
type ListDirResult struct {
	Path      string     `json:"path"`
	Entries   []DirEntry `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// ReadFileRequest is the payload of read-file. Lines are 1-based and
// inclusive; zero means the start or the end of the file.
type ReadFileRequest struct {
	Path      string `json:"path"`
	StartLine int    `json:"start_line,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	// MaxBytes bounds Content (line number prefixes included); default,
	// and at most, the tree's ReadCap. Content ends at a line boundary
	// unless its first line alone is longer.
	MaxBytes int `json:"max_bytes,omitempty"`
	// LineNumbers prefixes each line of Content with its number, as
	// "%6d\t" (cat -n).
	LineNumbers bool `json:"line_numbers,omitempty"`
	// Encoding "base64" returns the raw bytes base64-encoded, and refuses
	// the line options. A file that is not text (a NUL byte, or not
	// UTF-8) is returned so even when not asked, unless a line option
	// was given, which then answers invalid_payload.
	Encoding string `json:"encoding,omitempty"`
}

// ReadFileResult answers read-file.
type ReadFileResult struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	Size     int64  `json:"size"`
	// TotalLines counts the file's lines (a last line without '\n'
	// included). It is 0 for base64 results and for text files over
	// 64 MiB, which are not read to their end.
	TotalLines int `json:"total_lines"`
	// StartLine and EndLine are the first and last line in Content; both
	// 0 when it holds none.
	StartLine int `json:"start_line"`
	EndLine   int `json:"end_line"`
	// Truncated: Content stops before the end of the range asked for
	// (the file's end by default) because of MaxBytes.
	Truncated bool `json:"truncated"`
}

// SearchRequest is the payload of search.
type SearchRequest struct {
	// Pattern is a regular expression (Rust regex syntax with ripgrep, Go
	// RE2 syntax without it; they agree on the common subset), or a plain
	// string with Fixed.
	Pattern string `json:"pattern"`
	// Path limits the search to a file or directory of the tree.
	Path string `json:"path,omitempty"`
	// Fixed (or its other name Literal) searches for Pattern as it is.
	Fixed           bool `json:"fixed,omitempty"`
	Literal         bool `json:"literal,omitempty"`
	CaseInsensitive bool `json:"case_insensitive,omitempty"`
	// Glob limits the files searched, e.g. "*.go".
	Glob string `json:"glob,omitempty"`
	// Context is how many lines before and after each hit come with it;
	// at most 10.
	Context int `json:"context,omitempty"`
	// MaxResults bounds the hits; default 1000, at most 10000.
	MaxResults int `json:"max_results,omitempty"`
}

// SearchResult answers search.
type SearchResult struct {
	Hits []SearchHit `json:"hits"`
	// Rendered is the hits as text, one line each: "path:line: text" for
	// a hit, "path-line- text" for a context line, "--" between groups
	// that are not adjacent (grep's layout).
	Rendered string `json:"rendered"`
	// Truncated: there were more hits than MaxResults, or than 192 KiB
	// of rendered text.
	Truncated bool `json:"truncated"`
	// Engine is "rg" or "go".
	Engine string `json:"engine"`
}

// Workspace modes.
const (
	ModeAnalysis = "analysis"
	ModeEdit     = "edit"
	ModeTask     = "task"
)

// CommitRequest is the payload of git/commit.
type CommitRequest struct {
	Message string `json:"message"`
}

// PushRequest is the payload of git/push.
type PushRequest struct {
	Remote string `json:"remote,omitempty"`
	// AuthToken is used for this push only; it is never stored.
	AuthToken string `json:"auth_token,omitempty"`
}

// StatusEntry is one changed path.
type StatusEntry struct {
	Status string `json:"status"`
	Path   string `json:"path"`
}

// DirEntry is one entry of list-dir; Path is relative to the worktree.
type DirEntry struct {
	Path string `json:"path"`
	Type string `json:"type"` // file, dir, symlink, other
	Size int64  `json:"size"`
}

// Capabilities say truthfully what a runtime gives the commands it runs.
type Capabilities struct {
	// Writable: commands may change the worktree.
	Writable bool `json:"writable"`
	// Isolated: commands cannot change anything outside the worktree (and
	// a private /tmp).
	Isolated bool `json:"isolated"`
	// Network: commands can open network connections.
	Network bool `json:"network"`
}

// Runtime states of WorkspaceStatus, asked of the runtime each time
// (for a container, of the engine), never remembered.
const (
	// RuntimeRunning: commands run at once (a container is up).
	RuntimeRunning = "running"
	// RuntimeStopped: the runtime is there but not running (a container
	// that exited, was stopped while idle, or crashed); the next command
	// starts it.
	RuntimeStopped = "stopped"
	// RuntimeMissing: there is no runtime (released, evicted, never
	// used, or a container removed behind tether's back); the next
	// command creates one.
	RuntimeMissing = "missing"
)

// WorkspaceStatus answers GET SandboxWorkspacesEndpoint/{workspace_id}:
// the workspace's record and its runtime's state.
type WorkspaceStatus struct {
	WorkspaceID string `json:"workspace_id"`
	Mode        string `json:"mode"`
	Branch      string `json:"branch,omitempty"`
	BaseRef     string `json:"base_ref"`
	BaseCommit  string `json:"base_commit"`
	Runtime     string `json:"runtime"`
	Network     string `json:"network"`
	// Container is the workspace's container options (runtime container).
	Container *ContainerOptions `json:"container,omitempty"`
	// RuntimeState is RuntimeRunning, RuntimeStopped or RuntimeMissing.
	RuntimeState string `json:"runtime_state"`
	// RuntimeDetail says more where the runtime can: a container's id
	// and exit status.
	RuntimeDetail string `json:"runtime_detail,omitempty"`
	Path          string `json:"path"`
	Pinned        bool   `json:"pinned"`
}

// SearchHit is one matching line, with its context lines when asked.
type SearchHit struct {
	Path   string   `json:"path"`
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// Session states, in SessionInfo.Status and an async ExecResult.
const (
	SessionRunning = "running"
	SessionExited  = "exited"
)

// SessionInfo describes one async exec session of a workspace.
type SessionInfo struct {
	SessionID string `json:"session_id"`
	Command   string `json:"command"`
	// Cwd is the directory the command started in, relative to the
	// worktree.
	Cwd       string     `json:"cwd"`
	Status    string     `json:"status"`
	ExitCode  *int       `json:"exit_code"`
	TimedOut  bool       `json:"timed_out"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// EndedBy and Error: see protocol.SessionOutput.
	EndedBy string `json:"ended_by,omitempty"`
	Error   string `json:"error,omitempty"`
	// OutputBytes counts every byte the session has written.
	OutputBytes int64 `json:"output_bytes"`
}

// SessionsResult answers …/{workspace_id}/sessions: the workspace's async
// sessions, running and recently ended, oldest first.
type SessionsResult struct {
	WorkspaceID string        `json:"workspace_id"`
	Sessions    []SessionInfo `json:"sessions"`
}

// Modes of ExecRequest.Mode, the terminal's.
const (
	ExecSync  = "sync"
	ExecAsync = "async"
)
