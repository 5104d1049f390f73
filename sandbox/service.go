//go:build !windows

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
	// OutputCap bounds a command's output, and a chunk of an async
	// session's; default DefaultOutputCap.
	OutputCap int
	// MaxSessions bounds a workspace's async sessions running at once;
	// default DefaultMaxSessions.
	MaxSessions int
	// SessionRing is how many of its most recent output bytes an async
	// session keeps; default DefaultSessionRing.
	SessionRing int
	// SessionKeep is how long an ended session stays readable; default
	// DefaultSessionKeep.
	SessionKeep time.Duration

	// Ports. Nil means the local adapters: LocalGit, JSONStore in
	// Root/store.json, Locks, and the runtimes subprocess and bwrap (the
	// container runtime, package sandbox/container, is added by whoever
	// wires the Service, as the bridge does).
	Cache     RepoCache
	Worktrees Worktrees
	Changes   Changes
	Store     Store
	Locks     Locker
	Runtimes  []RuntimeProvider
}

// Service is the sandbox application service. All methods are safe for
// concurrent use. Close it to stop the eviction loop and every running
// command, async sessions included.
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
	git       *LocalGit
	lockFile  *os.File
	scope     string // names this root's runtimes apart from another root's (RuntimeSpec.Name)
	stop      context.CancelFunc
	loopDone  chan struct{}
	closeOnce sync.Once

	mu     sync.Mutex
	live   map[string]liveRuntime // by workspace id
	closed bool                   // by Close: no runtime starts any more

	sessions sessionTable
}

type liveRuntime struct {
	rt   Runtime
	key  string // runtimeKey of the record it was started for
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
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SessionRing <= 0 {
		cfg.SessionRing = DefaultSessionRing
	}
	if cfg.SessionKeep <= 0 {
		cfg.SessionKeep = DefaultSessionKeep
	}
	cfg.Evict.setDefaults()
	sum := sha256.Sum256([]byte(root))
	s := &Service{cfg: cfg, log: cfg.Logger, root: root, lockFile: lf, live: map[string]liveRuntime{}, search: newSearcher(cfg.RgBin),
		scope: hex.EncodeToString(sum[:4])}
	lg := &LocalGit{Root: root, Bin: cfg.GitBin}
	s.git = lg
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
		provs = DefaultRuntimes(cfg)
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

// ErrClosed answers a command that reaches the Service after Close (a
// bridge's handler still running as the bridge shuts down): nothing would
// end what it started.
var ErrClosed = errors.New("sandbox: service closed")

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
		s.closed = true
		for id, l := range s.live {
			l.rt.Stop()
			delete(s.live, id)
		}
		s.mu.Unlock()
		// Every session ended with its runtime; its waiter records that.
		s.sessions.wg.Wait()
		err = s.store.Flush()
		s.lockFile.Close() // releases the flock
	})
	return err
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

// withWorkspace runs f on id's active record: under the workspace lock
// when write is set (whatever changes the worktree or runs in it, so such
// calls on one workspace take turns), else without a lock. Either counts
// as a use of the workspace for eviction.
func (s *Service) withWorkspace(ctx context.Context, id string, write bool, f func(rec *Record) error) error {
	rec, err := s.workspace(id)
	if err != nil {
		return err
	}
	if write {
		unlock, err := s.locks.Lock(ctx, "ws:"+id)
		if err != nil {
			return err
		}
		defer unlock()
		if rec, err = s.workspace(id); err != nil { // it may have gone while we waited
			return err
		}
	}
	s.store.Touch(id, s.cfg.Now())
	return f(rec)
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

// DefaultRuntimes are the runtimes a Service of cfg has when cfg.Runtimes
// is nil: subprocess and bwrap.
func DefaultRuntimes(cfg Config) []RuntimeProvider {
	return []RuntimeProvider{&Subprocess{OutputCap: cfg.OutputCap}, &Bwrap{Bin: cfg.BwrapBin, OutputCap: cfg.OutputCap}}
}

// RuntimeStatuses says of each of provs whether it can run here, in
// order: a provider that can tell (an Available method, as Bwrap's) is
// asked, once per provider; any other is available.
func RuntimeStatuses(provs []RuntimeProvider) []protocol.RuntimeStatus {
	out := make([]protocol.RuntimeStatus, 0, len(provs))
	for _, p := range provs {
		st := protocol.RuntimeStatus{Name: p.Name(), Available: true}
		if a, ok := p.(interface{ Available() error }); ok {
			if err := a.Available(); err != nil {
				st.Available, st.Reason = false, err.Error()
				if pe, ok := errors.AsType[*protocol.Error](err); ok {
					st.Reason = pe.Message
				}
			}
		}
		out = append(out, st)
	}
	return out
}
