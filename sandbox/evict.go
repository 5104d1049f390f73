//go:build !windows

package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// EvictPolicy says what eviction may remove and when. Zero durations take
// the defaults below.
type EvictPolicy struct {
	// Interval runs Evict in the background this often; 0 runs it only on
	// demand.
	Interval time.Duration
	// RuntimeIdle: a runtime unused this long is stopped (tier 1).
	RuntimeIdle time.Duration
	// AnalysisTTL, TaskTTL and EditTTL: a workspace unused this long may
	// be removed; clean ones always, dirty ones only under disk pressure.
	AnalysisTTL, TaskTTL, EditTTL time.Duration
	// CacheTTL: a repo cache without workspaces, unused this long, is
	// removed; under disk pressure any cache without workspaces may go.
	CacheTTL time.Duration
	// Pressure reports disk pressure. Default: less than MinFreeFraction
	// of the root's file system is free.
	Pressure func() bool
	// MinFreeFraction is the default Pressure's threshold; default 0.10.
	MinFreeFraction float64
}

// Defaults of EvictPolicy.
const (
	DefaultRuntimeIdle = 30 * time.Minute
	DefaultAnalysisTTL = 24 * time.Hour
	DefaultTaskTTL     = 7 * 24 * time.Hour
	DefaultEditTTL     = 14 * 24 * time.Hour
	DefaultCacheTTL    = 30 * 24 * time.Hour
)

func (p *EvictPolicy) setDefaults() {
	setDefault(&p.RuntimeIdle, DefaultRuntimeIdle)
	setDefault(&p.AnalysisTTL, DefaultAnalysisTTL)
	setDefault(&p.TaskTTL, DefaultTaskTTL)
	setDefault(&p.EditTTL, DefaultEditTTL)
	setDefault(&p.CacheTTL, DefaultCacheTTL)
	setDefault(&p.MinFreeFraction, 0.10)
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Eviction tiers, in the order they are applied.
const (
	TierRuntime       = 1 // idle runtimes stopped
	TierCleanAnalysis = 2
	TierCleanTask     = 3
	TierCleanEdit     = 4
	TierDirtyTask     = 5 // dirty analysis and task workspaces, under pressure only
	TierDirtyEdit     = 6 // under pressure only
	TierRepoCache     = 7 // caches without workspaces, LRU, larger first on ties
)

// EvictRequest is the payload of /api/sandbox/evict.
type EvictRequest struct {
	// DryRun reports what would be evicted and changes nothing.
	DryRun bool `json:"dry_run"`
}

// EvictAction is one thing evicted (or, on a dry run, that would be).
type EvictAction struct {
	Tier int    `json:"tier"`
	Kind string `json:"kind"` // runtime, workspace, repo_cache
	// ID is the workspace id, or the repo key for a cache.
	ID     string `json:"id"`
	Mode   string `json:"mode,omitempty"`
	Dirty  bool   `json:"dirty,omitempty"`
	Reason string `json:"reason"`
	// Artifact is the patch a dirty workspace was saved to.
	Artifact string `json:"artifact,omitempty"`
	Bytes    int64  `json:"bytes,omitempty"`
	Error    string `json:"error,omitempty"`
}

// EvictResult answers evict.
type EvictResult struct {
	DryRun   bool          `json:"dry_run"`
	Pressure bool          `json:"pressure"`
	Actions  []EvictAction `json:"actions"`
}

func (s *Service) evictLoop(ctx context.Context) {
	defer close(s.loopDone)
	t := time.NewTicker(s.cfg.Evict.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			res, err := s.Evict(ctx, EvictRequest{})
			if err != nil && ctx.Err() == nil {
				s.log.Warn().Err(err).Msg("sandbox eviction failed")
			}
			for _, a := range res.Actions {
				s.log.Info().Int("tier", a.Tier).Str("kind", a.Kind).Str("id", a.ID).Str("reason", a.Reason).
					Str("artifact", a.Artifact).Str("error", a.Error).Msg("sandbox evicted")
			}
			if err := s.store.Flush(); err != nil {
				s.log.Warn().Err(err).Msg("flushing the sandbox store")
			}
		}
	}
}

func (s *Service) pressure() bool {
	if s.cfg.Evict.Pressure != nil {
		return s.cfg.Evict.Pressure()
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.root, &st); err != nil || st.Blocks == 0 {
		return false
	}
	return float64(st.Bavail)/float64(st.Blocks) < s.cfg.Evict.MinFreeFraction
}

// Evict applies the tiers in order: idle runtimes; clean analysis, task
// and edit workspaces past their TTL; then, only under disk pressure,
// dirty task and edit workspaces past their TTL, each saved first as a
// patch artifact; last, repo caches without workspaces. Pinned workspaces
// are never removed. One eviction runs at a time.
func (s *Service) Evict(ctx context.Context, req EvictRequest) (EvictResult, error) {
	unlock, err := s.locks.Lock(ctx, "evict")
	if err != nil {
		return EvictResult{}, err
	}
	defer unlock()
	p := s.cfg.Evict
	now := s.cfg.Now()
	res := EvictResult{DryRun: req.DryRun, Pressure: s.pressure(), Actions: []EvictAction{}}

	// Tier 1: runtimes.
	s.mu.Lock()
	var idle []string
	for id, l := range s.live {
		// A runtime with a running async session is in use.
		if now.Sub(l.used) >= p.RuntimeIdle && len(s.sessions.live(id)) == 0 {
			idle = append(idle, id)
		}
	}
	s.mu.Unlock()
	slices.Sort(idle)
	for _, id := range idle {
		if !req.DryRun {
			s.stopRuntime(id)
		}
		res.Actions = append(res.Actions, EvictAction{Tier: TierRuntime, Kind: "runtime", ID: id, Reason: "idle"})
	}

	// Tiers 2-6: workspaces past their TTL, least recently used first.
	type cand struct {
		rec   Record
		dirty bool
		tier  int
	}
	var cands []cand
	for _, rec := range s.store.Workspaces() {
		if rec.State != StateActive || rec.Pinned {
			continue
		}
		ttl := map[string]time.Duration{ModeAnalysis: p.AnalysisTTL, ModeTask: p.TaskTTL, ModeEdit: p.EditTTL}[rec.Mode]
		if now.Sub(rec.LastUsed) < ttl {
			continue
		}
		dirty := false
		if s.worktreePresent(&rec) {
			st, err := s.changes.Status(ctx, &rec, StatusRequest{})
			if err != nil {
				res.Actions = append(res.Actions, EvictAction{Kind: "workspace", ID: rec.ID, Mode: rec.Mode, Error: err.Error()})
				continue
			}
			dirty = !st.Clean
		}
		tier := map[string]int{ModeAnalysis: TierCleanAnalysis, ModeTask: TierCleanTask, ModeEdit: TierCleanEdit}[rec.Mode]
		if dirty {
			tier = TierDirtyTask
			if rec.Mode == ModeEdit {
				tier = TierDirtyEdit
			}
		}
		cands = append(cands, cand{rec, dirty, tier})
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if a.tier != b.tier {
			return a.tier - b.tier
		}
		return a.rec.LastUsed.Compare(b.rec.LastUsed)
	})
	for _, c := range cands {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if c.dirty && !s.pressure() {
			continue
		}
		a := EvictAction{Tier: c.tier, Kind: "workspace", ID: c.rec.ID, Mode: c.rec.Mode, Dirty: c.dirty, Reason: "unused past its TTL"}
		if c.dirty {
			a.Reason = "unused past its TTL, under disk pressure"
		}
		if !req.DryRun {
			art, err := s.evictWorkspace(ctx, c.rec.ID, c.dirty)
			a.Artifact = art
			if err != nil {
				a.Error = err.Error()
			}
		}
		res.Actions = append(res.Actions, a)
	}

	// Tier 7: repo caches nobody's active workspace uses.
	inUse := map[string]bool{}
	for _, rec := range s.store.Workspaces() {
		if rec.State == StateActive {
			inUse[rec.Repo.Key()] = true
		}
	}
	type cacheCand struct {
		rr   RepoRecord
		size int64
	}
	var caches []cacheCand
	for _, rr := range s.store.Repos() {
		if inUse[rr.Repo.Key()] {
			continue
		}
		caches = append(caches, cacheCand{rr, dirSize(rr.Dir)})
	}
	slices.SortStableFunc(caches, func(a, b cacheCand) int {
		if c := a.rr.LastUsed.Compare(b.rr.LastUsed); c != 0 {
			return c
		}
		return int(b.size - a.size)
	})
	for _, c := range caches {
		expired := now.Sub(c.rr.LastUsed) >= p.CacheTTL
		if !expired && !s.pressure() {
			continue
		}
		a := EvictAction{Tier: TierRepoCache, Kind: "repo_cache", ID: c.rr.Repo.Key(), Bytes: c.size, Reason: "unused past its TTL"}
		if !expired {
			a.Reason = "least recently used, under disk pressure"
		}
		if !req.DryRun {
			if err := s.evictCache(ctx, c.rr); err != nil {
				a.Error = err.Error()
			}
		}
		res.Actions = append(res.Actions, a)
	}
	return res, nil
}

// evictWorkspace removes a workspace's worktree, saving its changes
// first when dirty, and keeps its record as evicted (with the artifact)
// so a later acquire of the key can point to it.
func (s *Service) evictWorkspace(ctx context.Context, id string, dirty bool) (string, error) {
	unlock, err := s.locks.Lock(ctx, "ws:"+id)
	if err != nil {
		return "", err
	}
	defer unlock()
	rec, ok := s.store.Workspace(id)
	if !ok || rec.State != StateActive {
		return "", nil // destroyed meanwhile
	}
	s.stopRuntime(id)
	var art string
	if dirty && s.worktreePresent(&rec) {
		art = filepath.Join(s.root, "artifacts", id+"-"+strconv.FormatInt(s.cfg.Now().UnixNano(), 10)+".patch")
		if err := s.changes.SavePatch(ctx, &rec, art); err != nil {
			return "", fmt.Errorf("saving the changes of %s before eviction: %w", id, err)
		}
	}
	if err := s.removeWorktree(ctx, &rec); err != nil {
		return art, err
	}
	rec.State, rec.Artifact = StateEvicted, art
	return art, s.store.PutWorkspace(rec)
}

func (s *Service) evictCache(ctx context.Context, rr RepoRecord) error {
	unlock, err := s.locks.Lock(ctx, "repo:"+rr.Repo.Key())
	if err != nil {
		return err
	}
	defer unlock()
	for _, rec := range s.store.Workspaces() { // re-checked under the lock
		if rec.State == StateActive && rec.Repo.Key() == rr.Repo.Key() {
			return nil
		}
	}
	if err := s.cache.Delete(ctx, rr.Repo); err != nil {
		return err
	}
	return s.store.DeleteRepo(rr.Repo.Key())
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
