//go:build !windows

package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"

	"github.com/tetherdev/tether/protocol"
)

// Acquiring a workspace: the worktree of a request's key, created on the
// first acquire from a fetched repo cache, and removed by Destroy. The
// request's checks are in validate.go.

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
	kind, network, opts, err := s.runtimeChoice(req.Runtime, req.Network, req.Container)
	if err != nil {
		return AcquireResult{}, err
	}
	// Fast path, without the workspace lock, so a re-acquire does not
	// wait for a long command running in the workspace.
	if rec, ok := s.store.Workspace(id); ok && rec.State == StateActive && s.worktreePresent(&rec) &&
		(req.Pinned == nil || *req.Pinned == rec.Pinned) &&
		(req.Runtime == "" || kind == rec.Runtime) && (req.Network == "" || network == rec.Network) &&
		(req.Container == nil || reflect.DeepEqual(opts, rec.Container)) {
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
			if kind != RuntimeContainer || req.Container == nil {
				rec.Container = opts // nil, or the bridge's defaults
			}
		}
		if req.Container != nil && !reflect.DeepEqual(opts, rec.Container) {
			rec.Container, changed = opts, true
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
	next := Record{
		ID: id, Mode: req.Mode, UserID: req.UserID, ProjectID: req.ProjectID,
		ConversationID: req.ConversationID, TaskID: req.TaskID,
		Repo: repo, Branch: branch, Runtime: kind, Network: network, Container: opts,
		State: StateActive, CreatedAt: now, LastUsed: now,
		Dir: filepath.Join(s.root, "worktrees", repo.Host, filepath.FromSlash(repo.Owner), repo.Name, id),
	}
	if err := s.checkRuntime(ctx, kind, s.spec(&next)); err != nil {
		return AcquireResult{}, err
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

func result(rec *Record, caps Capabilities, created bool) AcquireResult {
	return AcquireResult{
		WorkspaceID: rec.ID, Mode: rec.Mode, Branch: rec.Branch, BaseRef: rec.BaseRef, BaseCommit: rec.BaseCommit,
		Runtime: rec.Runtime, Network: rec.Network, Container: rec.Container, Capabilities: caps, Created: created, Path: rec.Dir, Artifact: rec.Artifact,
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
