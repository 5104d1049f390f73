package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/protocol"
)

// Workspace modes.
const (
	ModeAnalysis = "analysis"
	ModeEdit     = "edit"
	ModeTask     = "task"
)

// Defaults of Config.
const (
	DefaultFetchInterval = 5 * time.Minute
	DefaultRuntime       = "subprocess"
)

// Config configures a Service. Only Root is required.
type Config struct {
	// Root holds everything: repos/, worktrees/, artifacts/ and the store
	// file. It is created if missing. One process uses a root at a time
	// (New takes a lock file in it).
	Root string
	// Logger receives one event per workspace lifecycle point; auth tokens
	// never reach it.
	Logger zerolog.Logger
	// Now is the clock; tests pass a fake one. Default time.Now.
	Now func() time.Time
	// FetchInterval is how old a cache's last fetch may be before an
	// acquire fetches again. Default DefaultFetchInterval.
	FetchInterval time.Duration
	// DefaultRuntime is the runtime of an acquire that names none.
	// Default "subprocess".
	DefaultRuntime string
	// ReadCap bounds read-file; default DefaultReadCap.
	ReadCap int
	// Eviction policy; see EvictPolicy.
	Evict EvictPolicy

	// GitBin, BwrapBin and RgBin name the binaries; default from PATH.
	// RgBin "-" forces the Go search.
	GitBin, BwrapBin, RgBin string
	// OutputCap bounds a command's output; default DefaultOutputCap.
	OutputCap int

	// Ports. Nil means the local adapters: LocalGit, JSONStore in
	// Root/store.json, Locks, and the runtimes subprocess and bwrap.
	Cache     RepoCache
	Worktrees Worktrees
	Changes   Changes
	Store     Store
	Locks     Locker
	Runtimes  []RuntimeProvider
}

// Service is the sandbox application service. All methods are safe for
// concurrent use. Close it to stop the eviction loop and every running
// command.
type Service struct {
	cfg       Config
	log       zerolog.Logger
	root      string
	cache     RepoCache
	trees     Worktrees
	changes   Changes
	store     Store
	locks     Locker
	runtimes  map[string]RuntimeProvider
	search    searcher
	lockFile  *os.File
	stop      context.CancelFunc
	loopDone  chan struct{}
	closeOnce sync.Once

	mu   sync.Mutex
	live map[string]liveRuntime // by workspace id
}

type liveRuntime struct {
	rt   Runtime
	kind string
	net  string
	used time.Time
}

// New opens (or creates) the sandbox at cfg.Root. With
// cfg.Evict.Interval > 0 it starts the eviction loop.
func New(cfg Config) (*Service, error) {
	if cfg.Root == "" {
		return nil, errors.New("sandbox: Root is required")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("sandbox: resolving root: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: creating root: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox: opening the root lock: %w", err)
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("sandbox: %s is in use by another process: %w", root, err)
	}
	cfg.Root = root
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FetchInterval == 0 {
		cfg.FetchInterval = DefaultFetchInterval
	}
	if cfg.DefaultRuntime == "" {
		cfg.DefaultRuntime = DefaultRuntime
	}
	if cfg.ReadCap <= 0 {
		cfg.ReadCap = DefaultReadCap
	}
	cfg.Evict.setDefaults()
	s := &Service{cfg: cfg, log: cfg.Logger, root: root, lockFile: lf, live: map[string]liveRuntime{}, search: newSearcher(cfg.RgBin)}
	lg := &LocalGit{Root: root, Bin: cfg.GitBin}
	s.cache, s.trees, s.changes = cfg.Cache, cfg.Worktrees, cfg.Changes
	if s.cache == nil {
		s.cache = lg
	}
	if s.trees == nil {
		s.trees = lg
	}
	if s.changes == nil {
		s.changes = lg
	}
	s.locks = cfg.Locks
	if s.locks == nil {
		s.locks = &Locks{}
	}
	s.store = cfg.Store
	if s.store == nil {
		st, err := OpenJSONStore(filepath.Join(root, "store.json"))
		if err != nil {
			lf.Close()
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		s.store = st
	}
	provs := cfg.Runtimes
	if provs == nil {
		provs = []RuntimeProvider{&Subprocess{OutputCap: cfg.OutputCap}, &Bwrap{Bin: cfg.BwrapBin, OutputCap: cfg.OutputCap}}
	}
	s.runtimes = map[string]RuntimeProvider{}
	for _, p := range provs {
		s.runtimes[p.Name()] = p
	}
	if cfg.Evict.Interval > 0 {
		ctx, stop := context.WithCancel(context.Background())
		s.stop, s.loopDone = stop, make(chan struct{})
		go s.evictLoop(ctx)
	}
	return s, nil
}

// Root returns the absolute sandbox root.
func (s *Service) Root() string { return s.root }

// Close stops the eviction loop and every running command, persists the
// last-used times and releases the root. Workspaces stay on disk.
func (s *Service) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.stop != nil {
			s.stop()
			<-s.loopDone
		}
		s.mu.Lock()
		for id, l := range s.live {
			l.rt.Stop()
			delete(s.live, id)
		}
		s.mu.Unlock()
		err = s.store.Flush()
		s.lockFile.Close() // releases the flock
	})
	return err
}

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
	// Runtime is "subprocess" or "bwrap"; default Config.DefaultRuntime.
	Runtime string `json:"runtime,omitempty"`
	// Network is "none" or "host"; default "none" for bwrap, "host" for
	// subprocess.
	Network string `json:"network,omitempty"`
	// Pinned keeps the workspace from eviction.
	Pinned *bool `json:"pinned,omitempty"`
}

// Validate checks the request without touching the disk.
func (r *AcquireRequest) Validate() error {
	_, err := r.check()
	return err
}

func (r *AcquireRequest) check() (Repo, error) {
	repo, err := ParseRepo(r.Repo)
	if err != nil {
		return Repo{}, err
	}
	if r.BaseRef != "" {
		if err := ValidateRef(r.BaseRef); err != nil {
			return Repo{}, err
		}
	}
	if err := validateName("user_id", r.UserID); err != nil {
		return Repo{}, err
	}
	if err := validateName("project_id", r.ProjectID); err != nil {
		return Repo{}, err
	}
	switch r.Mode {
	case ModeAnalysis:
	case ModeEdit:
		if err := validateID("conversation_id", r.ConversationID); err != nil {
			return Repo{}, err
		}
	case ModeTask:
		if err := validateID("task_id", r.TaskID); err != nil {
			return Repo{}, err
		}
	default:
		return Repo{}, protocol.Errorf(protocol.CodeInvalidPayload, "mode %q: use analysis, edit or task", r.Mode)
	}
	switch r.Network {
	case "", NetworkNone, NetworkHost:
	default:
		return Repo{}, protocol.Errorf(protocol.CodeInvalidPayload, "network %q: use none or host", r.Network)
	}
	return repo, nil
}

// key returns the workspace id and branch the request maps to.
func (r *AcquireRequest) key(repo Repo) (id, branch string) {
	var disc string
	switch r.Mode {
	case ModeAnalysis:
		disc = r.BaseRef
	case ModeEdit:
		disc, branch = r.ConversationID, "agent/edits-"+r.ConversationID
	case ModeTask:
		disc, branch = r.TaskID, "agent/task-"+r.TaskID
	}
	sum := sha256.Sum256([]byte(r.Mode + "\x00" + r.UserID + "\x00" + r.ProjectID + "\x00" + disc + "\x00" + repo.Key()))
	return "ws-" + hex.EncodeToString(sum[:10]), branch
}

// AcquireResult answers acquire.
type AcquireResult struct {
	WorkspaceID  string       `json:"workspace_id"`
	Mode         string       `json:"mode"`
	Branch       string       `json:"branch"`
	BaseRef      string       `json:"base_ref"`
	BaseCommit   string       `json:"base_commit"`
	Runtime      string       `json:"runtime"`
	Network      string       `json:"network"`
	Capabilities Capabilities `json:"capabilities"`
	// Created: this call made the worktree; false when it already existed.
	Created bool `json:"created"`
	// Path is the worktree on the machine serving the sandbox.
	Path string `json:"path"`
	// Artifact is the patch saved when an earlier worktree of this key was
	// evicted dirty.
	Artifact string `json:"artifact,omitempty"`
}

// AcquireWorkspace returns the workspace of the request's key, creating
// it if needed: ensure the repo cache, fetch it if stale, get or create
// the worktree. It is idempotent by key, and safe to call concurrently
// for one key (callers wait for each other) and for many.
func (s *Service) AcquireWorkspace(ctx context.Context, req AcquireRequest) (AcquireResult, error) {
	repo, err := req.check()
	if err != nil {
		return AcquireResult{}, err
	}
	id, branch := req.key(repo)
	kind, network, err := s.runtimeChoice(req.Runtime, req.Network)
	if err != nil {
		return AcquireResult{}, err
	}
	// Fast path, without the workspace lock, so a re-acquire does not
	// wait for a long command running in the workspace.
	if rec, ok := s.store.Workspace(id); ok && rec.State == StateActive && s.worktreePresent(&rec) &&
		(req.Pinned == nil || *req.Pinned == rec.Pinned) &&
		(req.Runtime == "" || kind == rec.Runtime) && (req.Network == "" || network == rec.Network) {
		if err := s.maybeFetch(ctx, repo, req.AuthToken, false); err != nil {
			return AcquireResult{}, err
		}
		caps, err := s.ensureRuntime(ctx, &rec)
		if err != nil {
			return AcquireResult{}, err
		}
		s.store.Touch(id, s.cfg.Now())
		return result(&rec, caps, false), nil
	}
	unlock, err := s.locks.Lock(ctx, "ws:"+id)
	if err != nil {
		return AcquireResult{}, err
	}
	defer unlock()
	now := s.cfg.Now()
	rec, ok := s.store.Workspace(id)
	if ok && rec.State == StateActive && s.worktreePresent(&rec) {
		if err := s.maybeFetch(ctx, repo, req.AuthToken, false); err != nil {
			return AcquireResult{}, err
		}
		changed := false
		if req.Pinned != nil && rec.Pinned != *req.Pinned {
			rec.Pinned, changed = *req.Pinned, true
		}
		if (req.Runtime != "" && kind != rec.Runtime) || (req.Network != "" && network != rec.Network) {
			rec.Runtime, rec.Network, changed = kind, network, true
		}
		caps, err := s.ensureRuntime(ctx, &rec)
		if err != nil {
			return AcquireResult{}, err
		}
		if changed {
			rec.LastUsed = now
			if err := s.store.PutWorkspace(rec); err != nil {
				return AcquireResult{}, err
			}
		} else {
			s.store.Touch(id, now)
		}
		return result(&rec, caps, false), nil
	}

	// A new worktree (or one that is gone: evicted, or removed behind our
	// back). The runtime is checked first so a refusal leaves no trace.
	if err := s.checkRuntime(ctx, kind, network); err != nil {
		return AcquireResult{}, err
	}
	next := Record{
		ID: id, Mode: req.Mode, UserID: req.UserID, ProjectID: req.ProjectID,
		ConversationID: req.ConversationID, TaskID: req.TaskID,
		Repo: repo, Branch: branch, Runtime: kind, Network: network,
		State: StateActive, CreatedAt: now, LastUsed: now,
		Dir: filepath.Join(s.root, "worktrees", repo.Host, filepath.FromSlash(repo.Owner), repo.Name, id),
	}
	if ok {
		next.Artifact, next.Pinned = rec.Artifact, rec.Pinned
	}
	if req.Pinned != nil {
		next.Pinned = *req.Pinned
	}
	if err := s.createWorktree(ctx, &next, req.BaseRef, req.AuthToken); err != nil {
		return AcquireResult{}, err
	}
	caps, err := s.ensureRuntime(ctx, &next)
	if err != nil {
		return AcquireResult{}, err
	}
	s.logger(ctx).Info().Str("sandbox_workspace", id).Str("repo", repo.Key()).Str("mode", req.Mode).
		Str("branch", branch).Str("base_ref", next.BaseRef).Msg("sandbox workspace created")
	return result(&next, caps, true), nil
}

// logger is the call's logger when ctx carries one (the bridge puts the
// call's correlation_id, endpoint and workspace_id there), else the
// Service's.
func (s *Service) logger(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled && l != zerolog.DefaultContextLogger {
		return l
	}
	return &s.log
}

func result(rec *Record, caps Capabilities, created bool) AcquireResult {
	return AcquireResult{
		WorkspaceID: rec.ID, Mode: rec.Mode, Branch: rec.Branch, BaseRef: rec.BaseRef, BaseCommit: rec.BaseCommit,
		Runtime: rec.Runtime, Network: rec.Network, Capabilities: caps, Created: created, Path: rec.Dir, Artifact: rec.Artifact,
	}
}

func (s *Service) worktreePresent(rec *Record) bool {
	_, err := os.Stat(filepath.Join(rec.Dir, ".git"))
	return err == nil
}

// createWorktree ensures the cache, fetches it when stale, adds the
// worktree and records it, all under the repository lock.
func (s *Service) createWorktree(ctx context.Context, rec *Record, baseRef, auth string) error {
	unlock, err := s.locks.Lock(ctx, "repo:"+rec.Repo.Key())
	if err != nil {
		return err
	}
	defer unlock()
	cloned, err := s.cache.Ensure(ctx, rec.Repo, auth)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	rr, ok := s.store.Repo(rec.Repo.Key())
	if !ok || cloned {
		rr = RepoRecord{Repo: rec.Repo, Dir: s.cache.Dir(rec.Repo), LastFetch: now}
	}
	if !cloned && now.Sub(rr.LastFetch) >= s.cfg.FetchInterval {
		if err := s.cache.Fetch(ctx, rec.Repo, auth); err != nil {
			return err
		}
		rr.LastFetch = now
	}
	rr.LastUsed = now
	name, commit, err := s.cache.Resolve(ctx, rec.Repo, baseRef)
	if err != nil {
		return err
	}
	rec.BaseRef, rec.BaseCommit = name, commit
	gitDir, err := s.trees.Add(ctx, rec.Repo, rec.Dir, rec.Branch, commit)
	if err != nil {
		return err
	}
	rec.GitDir = gitDir
	if err := s.store.PutRepo(rr); err != nil {
		return err
	}
	// Recorded before the repository lock is released, so cache eviction
	// (which takes that lock) sees the workspace.
	return s.store.PutWorkspace(*rec)
}

// maybeFetch fetches the cache if its last fetch is older than
// FetchInterval (or always with force).
func (s *Service) maybeFetch(ctx context.Context, repo Repo, auth string, force bool) error {
	rr, ok := s.store.Repo(repo.Key())
	if ok && !force && s.cfg.Now().Sub(rr.LastFetch) < s.cfg.FetchInterval {
		return nil
	}
	unlock, err := s.locks.Lock(ctx, "repo:"+repo.Key())
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.cache.Fetch(ctx, repo, auth); err != nil {
		return err
	}
	if !ok {
		rr = RepoRecord{Repo: repo, Dir: s.cache.Dir(repo)}
	}
	rr.LastFetch = s.cfg.Now()
	return s.store.PutRepo(rr)
}

func (s *Service) runtimeChoice(kind, network string) (string, string, error) {
	if kind == "" {
		kind = s.cfg.DefaultRuntime
	}
	if _, ok := s.runtimes[kind]; !ok {
		return "", "", protocol.Errorf(protocol.CodeInvalidPayload, "runtime %q: use subprocess or bwrap", kind)
	}
	if network == "" {
		network = NetworkHost
		if kind == "bwrap" {
			network = NetworkNone
		}
	}
	return kind, network, nil
}

func (s *Service) spec(rec *Record) RuntimeSpec {
	return RuntimeSpec{
		Dir: rec.Dir, Network: rec.Network,
		Hide:     []string{s.root},
		ReadOnly: []string{s.cache.Dir(rec.Repo)},
	}
}

// checkRuntime answers runtime_unavailable when kind cannot give network.
func (s *Service) checkRuntime(ctx context.Context, kind, network string) error {
	rt, err := s.runtimes[kind].Start(ctx, RuntimeSpec{Dir: s.root, Network: network})
	if err != nil {
		return err
	}
	rt.Stop()
	return nil
}

// ensureRuntime returns the capabilities of the workspace's runtime,
// starting it or replacing it if the record asks for another one.
func (s *Service) ensureRuntime(ctx context.Context, rec *Record) (Capabilities, error) {
	rt, err := s.runtime(ctx, rec)
	if err != nil {
		return Capabilities{}, err
	}
	return rt.Capabilities(), nil
}

func (s *Service) runtime(ctx context.Context, rec *Record) (Runtime, error) {
	now := s.cfg.Now()
	s.mu.Lock()
	l, ok := s.live[rec.ID]
	if ok && l.kind == rec.Runtime && l.net == rec.Network {
		l.used = now
		s.live[rec.ID] = l
		s.mu.Unlock()
		return l.rt, nil
	}
	s.mu.Unlock()
	if ok {
		l.rt.Stop() // replaced by another kind
	}
	p, found := s.runtimes[rec.Runtime]
	if !found {
		return nil, protocol.Errorf(protocol.CodeRuntimeUnavailable, "runtime %q is not offered here", rec.Runtime)
	}
	rt, err := p.Start(ctx, s.spec(rec))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if old, ok := s.live[rec.ID]; ok && old.rt != l.rt {
		old.rt.Stop()
	}
	s.live[rec.ID] = liveRuntime{rt: rt, kind: rec.Runtime, net: rec.Network, used: now}
	s.mu.Unlock()
	return rt, nil
}

// workspace returns the active record of id.
func (s *Service) workspace(id string) (*Record, error) {
	rec, ok := s.store.Workspace(id)
	if !ok {
		return nil, protocol.Errorf(protocol.CodeWorkspaceNotFound, "no sandbox workspace %q", id)
	}
	if rec.State != StateActive {
		msg := "sandbox workspace %q was evicted; acquire it again"
		if rec.Artifact != "" {
			return nil, protocol.Errorf(protocol.CodeWorkspaceNotFound, msg+" (its uncommitted changes are in %s)", id, rec.Artifact)
		}
		return nil, protocol.Errorf(protocol.CodeWorkspaceNotFound, msg, id)
	}
	return &rec, nil
}

// mutate runs f on id's record under the workspace lock.
func (s *Service) mutate(ctx context.Context, id string, f func(rec *Record) error) error {
	if _, err := s.workspace(id); err != nil {
		return err
	}
	unlock, err := s.locks.Lock(ctx, "ws:"+id)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := s.workspace(id) // it may have gone while we waited
	if err != nil {
		return err
	}
	s.store.Touch(id, s.cfg.Now())
	return f(rec)
}

// read runs f on id's record without a lock.
func (s *Service) read(id string, f func(rec *Record) error) error {
	rec, err := s.workspace(id)
	if err != nil {
		return err
	}
	s.store.Touch(id, s.cfg.Now())
	return f(rec)
}

// Exec runs a command in the workspace's runtime, starting the runtime
// if it was released.
func (s *Service) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	if req.Command == "" {
		return ExecResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "command is required")
	}
	var res ExecResult
	err := s.mutate(ctx, id, func(rec *Record) error {
		rel, err := CleanPath(req.Cwd)
		if err != nil {
			return err
		}
		root, err := openRoot(rec.Dir)
		if err != nil {
			return err
		}
		fi, err := root.Stat(rel)
		root.Close()
		if err != nil {
			return pathError("cwd", rel, err)
		}
		if !fi.IsDir() {
			return protocol.Errorf(protocol.CodeInvalidPath, "cwd %s is not a directory", rel)
		}
		req.dir = filepath.Join(rec.Dir, filepath.FromSlash(rel))
		rt, err := s.runtime(ctx, rec)
		if err != nil {
			return err
		}
		res, err = rt.Exec(ctx, req)
		s.mu.Lock()
		if l, ok := s.live[id]; ok && l.rt == rt {
			l.used = s.cfg.Now() // a long command is use until its end
			s.live[id] = l
		}
		s.mu.Unlock()
		return err
	})
	return res, err
}

// Release stops the workspace's runtime; the workspace stays as it is.
func (s *Service) Release(ctx context.Context, id string) error {
	if _, err := s.workspace(id); err != nil {
		return err
	}
	s.stopRuntime(id)
	s.logger(ctx).Info().Str("sandbox_workspace", id).Msg("sandbox runtime released")
	return s.store.Flush()
}

func (s *Service) stopRuntime(id string) bool {
	s.mu.Lock()
	l, ok := s.live[id]
	delete(s.live, id)
	s.mu.Unlock()
	if ok {
		l.rt.Stop()
	}
	return ok
}

// Destroy removes the workspace's worktree and record. The repo cache,
// and the workspace's branch in it, stay.
func (s *Service) Destroy(ctx context.Context, id string) error {
	rec, ok := s.store.Workspace(id)
	if !ok {
		return protocol.Errorf(protocol.CodeWorkspaceNotFound, "no sandbox workspace %q", id)
	}
	unlock, err := s.locks.Lock(ctx, "ws:"+id)
	if err != nil {
		return err
	}
	defer unlock()
	s.stopRuntime(id)
	if rec.State == StateActive {
		if err := s.removeWorktree(ctx, &rec); err != nil {
			return err
		}
	}
	s.logger(ctx).Info().Str("sandbox_workspace", id).Msg("sandbox workspace destroyed")
	return s.store.DeleteWorkspace(id)
}

func (s *Service) removeWorktree(ctx context.Context, rec *Record) error {
	unlock, err := s.locks.Lock(ctx, "repo:"+rec.Repo.Key())
	if err != nil {
		return err
	}
	defer unlock()
	return s.trees.Remove(ctx, rec.Repo, rec.Dir)
}

// WorkspaceInfo is one entry of List.
type WorkspaceInfo struct {
	Record
	// Running: a runtime is live for it.
	Running bool `json:"running"`
}

// ListRequest filters List; empty fields match everything.
type ListRequest struct {
	UserID    string `json:"user_id,omitempty"`
	ProjectID string `json:"project_id,omitempty"`
}

// ListResult answers list.
type ListResult struct {
	Workspaces []WorkspaceInfo `json:"workspaces"`
}

// List returns the workspaces the store knows, evicted ones included.
func (s *Service) List(req ListRequest) ListResult {
	out := ListResult{Workspaces: []WorkspaceInfo{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.store.Workspaces() {
		if (req.UserID != "" && r.UserID != req.UserID) || (req.ProjectID != "" && r.ProjectID != req.ProjectID) {
			continue
		}
		_, running := s.live[r.ID]
		out.Workspaces = append(out.Workspaces, WorkspaceInfo{Record: r, Running: running})
	}
	return out
}

// ReadFile reads a file of the workspace.
func (s *Service) ReadFile(_ context.Context, id string, req ReadFileRequest) (res ReadFileResult, err error) {
	err = s.read(id, func(rec *Record) error { res, err = readFile(rec.Dir, req, s.cfg.ReadCap); return err })
	return res, err
}

// WriteFile writes a file of the workspace.
func (s *Service) WriteFile(ctx context.Context, id string, req WriteFileRequest) (res WriteFileResult, err error) {
	err = s.mutate(ctx, id, func(rec *Record) error { res, err = writeFile(rec.Dir, req); return err })
	return res, err
}

// StrReplace replaces the one occurrence of req.Old in a file.
func (s *Service) StrReplace(ctx context.Context, id string, req StrReplaceRequest) (res StrReplaceResult, err error) {
	err = s.mutate(ctx, id, func(rec *Record) error { res, err = strReplace(rec.Dir, req); return err })
	return res, err
}

// ListDir lists a directory of the workspace.
func (s *Service) ListDir(_ context.Context, id string, req ListDirRequest) (res ListDirResult, err error) {
	err = s.read(id, func(rec *Record) error { res, err = listDir(rec.Dir, req); return err })
	return res, err
}

// Stat describes a path of the workspace.
func (s *Service) Stat(_ context.Context, id string, req PathRequest) (res StatResult, err error) {
	err = s.read(id, func(rec *Record) error { res, err = statPath(rec.Dir, req); return err })
	return res, err
}

// Exists reports whether a path of the workspace exists.
func (s *Service) Exists(_ context.Context, id string, req PathRequest) (res ExistsResult, err error) {
	err = s.read(id, func(rec *Record) error { res, err = exists(rec.Dir, req); return err })
	return res, err
}

// Mkdir creates a directory in the workspace.
func (s *Service) Mkdir(ctx context.Context, id string, req MkdirRequest) (res PathResult, err error) {
	err = s.mutate(ctx, id, func(rec *Record) error { res, err = mkdir(rec.Dir, req); return err })
	return res, err
}

// Rm removes a path of the workspace.
func (s *Service) Rm(ctx context.Context, id string, req RmRequest) (res PathResult, err error) {
	err = s.mutate(ctx, id, func(rec *Record) error { res, err = rm(rec.Dir, req); return err })
	return res, err
}

// Search searches the workspace's files.
func (s *Service) Search(ctx context.Context, id string, req SearchRequest) (res SearchResult, err error) {
	err = s.read(id, func(rec *Record) error { res, err = s.search.search(ctx, rec.Dir, req); return err })
	return res, err
}

// GitStatus reports the workspace's changes.
func (s *Service) GitStatus(ctx context.Context, id string) (res GitStatus, err error) {
	err = s.read(id, func(rec *Record) error { res, err = s.changes.Status(ctx, rec); return err })
	return res, err
}

// GitDiff returns the workspace's diff against HEAD.
func (s *Service) GitDiff(ctx context.Context, id string, req DiffRequest) (res GitDiff, err error) {
	err = s.read(id, func(rec *Record) error { res, err = s.changes.Diff(ctx, rec, req); return err })
	return res, err
}

// CommitRequest is the payload of git/commit.
type CommitRequest struct {
	Message string `json:"message"`
}

// GitCommit commits every change of the workspace on its branch.
func (s *Service) GitCommit(ctx context.Context, id string, req CommitRequest) (res GitCommit, err error) {
	if req.Message == "" {
		return GitCommit{}, protocol.Errorf(protocol.CodeInvalidPayload, "message is required")
	}
	err = s.mutate(ctx, id, func(rec *Record) error {
		if rec.Branch == "" {
			return protocol.Errorf(protocol.CodeInvalidRef, "an analysis workspace has no branch to commit to; acquire an edit or task workspace")
		}
		res, err = s.changes.Commit(ctx, rec, req.Message)
		return err
	})
	return res, err
}

// PushRequest is the payload of git/push.
type PushRequest struct {
	Remote string `json:"remote,omitempty"`
	// AuthToken is used for this push only; it is never stored.
	AuthToken string `json:"auth_token,omitempty"`
}

// GitPush pushes the workspace's branch.
func (s *Service) GitPush(ctx context.Context, id string, req PushRequest) (res GitPush, err error) {
	err = s.mutate(ctx, id, func(rec *Record) error { res, err = s.changes.Push(ctx, rec, req.Remote, req.AuthToken); return err })
	return res, err
}
