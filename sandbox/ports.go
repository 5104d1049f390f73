//go:build !windows

package sandbox

import (
	"context"
	"io"
	"syscall"
	"time"
)

// RepoCache keeps the durable bare clones. Implementations serialise
// nothing themselves: Service holds the repository lock around every call
// that writes.
type RepoCache interface {
	// Dir is where the bare clone of repo lives (or will live).
	Dir(repo Repo) string
	// Ensure clones repo if it is not cached yet and reports whether it did.
	Ensure(ctx context.Context, repo Repo, auth string) (cloned bool, err error)
	// Fetch updates the remote-tracking refs of the cache.
	Fetch(ctx context.Context, repo Repo, auth string) error
	// Resolve returns the commit a base ref names: a branch of origin, a
	// tag or a commit id. An empty ref means origin's default branch; the
	// name used is returned.
	Resolve(ctx context.Context, repo Repo, ref string) (name, commit string, err error)
	// Delete removes the cache.
	Delete(ctx context.Context, repo Repo) error
}

// Worktrees creates and removes the git worktrees of workspaces.
type Worktrees interface {
	// Add creates a worktree at dir. With branch empty it is detached at
	// commit; otherwise it checks out branch, creating it at commit
	// (without tracking) when the cache does not have it yet. It returns
	// the worktree's own git directory.
	Add(ctx context.Context, repo Repo, dir, branch, commit string) (gitDir string, err error)
	// Remove deletes the worktree at dir and prunes its metadata; the
	// branch stays in the cache.
	Remove(ctx context.Context, repo Repo, dir string) error
}

// Changes reads and records the changes in a workspace.
type Changes interface {
	Status(ctx context.Context, rec *Record, req StatusRequest) (GitStatus, error)
	Diff(ctx context.Context, rec *Record, req DiffRequest) (GitDiff, error)
	Commit(ctx context.Context, rec *Record, message string) (GitCommit, error)
	Push(ctx context.Context, rec *Record, remote, auth string) (GitPush, error)
	// SavePatch writes the workspace's uncommitted changes, tracked and
	// untracked, as one patch file at path (applicable with git apply).
	SavePatch(ctx context.Context, rec *Record, path string) error
}

// RuntimeSpec is what a runtime is started for.
type RuntimeSpec struct {
	// Dir is the worktree, absolute.
	Dir string
	// Network is NetworkNone or NetworkHost.
	Network string
	// Hide are directories an isolated runtime must not show at all (the
	// sandbox root, holding other workspaces and the store).
	Hide []string
	// ReadOnly are directories an isolated runtime shows read-only even
	// inside Hide (the repo cache the worktree's git reads).
	ReadOnly []string
	// Name is unique to the workspace and the sandbox root, for a runtime
	// that names what it creates (the container runtime's container).
	Name string
	// Analysis: the workspace is an analysis one, whose worktree a runtime
	// that can shows read-only.
	Analysis bool
	// Container are the container runtime's options; other runtimes
	// never get any (the Service refuses them).
	Container ContainerOptions
}

// Network modes of RuntimeSpec and acquire requests.
const (
	NetworkNone = "none"
	NetworkHost = "host"
)

// RuntimeProvider starts runtimes of one kind.
type RuntimeProvider interface {
	// Name is the kind, as requests name it: "subprocess", "bwrap",
	// "container".
	Name() string
	// Start prepares a runtime for spec. It answers runtime_unavailable
	// when this kind cannot give what spec asks for here.
	Start(ctx context.Context, spec RuntimeSpec) (Runtime, error)
}

// Runtime runs commands against one workspace. Stop ends the commands
// still running, started ones too (and removes whatever the runtime
// created, a container); the workspace is untouched.
type Runtime interface {
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	// Start starts a command whose stdout and stderr go to out (which
	// must take concurrent writes) until its Process's Wait returns: the
	// async sessions. ctx bounds the start only; req's Timeout and Stdin
	// are the caller's to apply.
	Start(ctx context.Context, req ExecRequest, out io.Writer) (Process, error)
	Capabilities() Capabilities
	Stop()
}

// Process is a command a Runtime started. Wait must be called, once: it
// frees what the command held. Input and Signal may be called
// concurrently with each other and with Wait.
type Process interface {
	// Input writes p to the command's stdin, then closes it when eof. It
	// waits while the command does not read, until ctx ends.
	Input(ctx context.Context, p []byte, eof bool) error
	// Signal delivers sig to the command's whole process tree. It answers
	// ErrProcessDone once the command has ended.
	Signal(sig syscall.Signal) error
	// Wait returns when the command has ended and its output is written:
	// its exit status (128+n when signal n ended it), or an error when
	// something else ended it (runtime_stopped: the runtime was stopped,
	// or its container died).
	Wait() (int, error)
}

// RuntimeStater is a RuntimeProvider that can say what state a
// workspace's runtime is in by asking what runs it (the container
// runtime asks the engine), whether or not this process started it. The
// Service asks it for WorkspaceStatus; for other providers the state is
// whether the Service holds a live runtime.
type RuntimeStater interface {
	// State returns RuntimeRunning, RuntimeStopped or RuntimeMissing, and
	// a detail line.
	State(ctx context.Context, spec RuntimeSpec) (state, detail string, err error)
}

// OptionDefaulter is a RuntimeProvider with defaults of its own for what
// a workspace leaves out of its options (the container runtime's
// bridge-wide image). Acquire fills them in, so the workspace's record,
// the acquire result and the status name what runs it, and a later change
// of the bridge's defaults does not swap a workspace's image under it.
type OptionDefaulter interface {
	DefaultOptions(opts ContainerOptions) ContainerOptions
}

// Store keeps the metadata of workspaces and repo caches across
// restarts. Methods are safe for concurrent use.
type Store interface {
	Workspace(id string) (Record, bool)
	PutWorkspace(rec Record) error
	DeleteWorkspace(id string) error
	Workspaces() []Record
	Repo(key string) (RepoRecord, bool)
	PutRepo(rec RepoRecord) error
	DeleteRepo(key string) error
	Repos() []RepoRecord
	// Touch records a use of a workspace and of its repository. It need
	// not be durable at once (it is on the hot path of re-acquire); Flush
	// makes it so.
	Touch(id string, t time.Time)
	Flush() error
}

// Locker hands out named mutexes. Lock waits until the lock is free or ctx
// ends; unlock must be called exactly once.
type Locker interface {
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

// Record is what the store keeps of a workspace.
type Record struct {
	ID             string `json:"id"`
	Mode           string `json:"mode"`
	UserID         string `json:"user_id"`
	ProjectID      string `json:"project_id"`
	ConversationID string `json:"conversation_id,omitempty"`
	TaskID         string `json:"task_id,omitempty"`
	Repo           Repo   `json:"repo"`
	BaseRef        string `json:"base_ref"`
	BaseCommit     string `json:"base_commit"`
	Branch         string `json:"branch,omitempty"`
	Dir            string `json:"dir"`
	GitDir         string `json:"git_dir"`
	Runtime        string `json:"runtime"`
	Network        string `json:"network"`
	// Container are the options of runtime container.
	Container *ContainerOptions `json:"container,omitempty"`
	Pinned    bool              `json:"pinned,omitempty"`
	State     string            `json:"state"`
	Artifact  string            `json:"artifact,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	LastUsed  time.Time         `json:"last_used"`
}

// Workspace states.
const (
	StateActive  = "active"
	StateEvicted = "evicted"
)

// RepoRecord is what the store keeps of a repo cache.
type RepoRecord struct {
	Repo      Repo      `json:"repo"`
	Dir       string    `json:"dir"`
	LastFetch time.Time `json:"last_fetch"`
	LastUsed  time.Time `json:"last_used"`
}
