//go:build !windows

package sandbox

import (
	"context"

	"github.com/tetherdev/tether/protocol"
)

// The file, search and git operations on a workspace: each finds the
// workspace's record (taking its lock when the operation writes) and
// passes the call through to the worktree's tree (files.go, search.go) or
// to the Changes port (changes.go).

// onWorkspace runs op with req on id's record; see withWorkspace for
// what write means.
func onWorkspace[Req, Res any](ctx context.Context, s *Service, id string, write bool, op func(context.Context, *Record, Req) (Res, error), req Req) (Res, error) {
	var res Res
	err := s.withWorkspace(ctx, id, write, func(rec *Record) error {
		var err error
		res, err = op(ctx, rec, req)
		return err
	})
	return res, err
}

// onTree is onWorkspace for an operation of the workspace's tree.
func onTree[Req, Res any](ctx context.Context, s *Service, id string, write bool, op func(*Tree, context.Context, Req) (Res, error), req Req) (Res, error) {
	return onWorkspace(ctx, s, id, write, func(ctx context.Context, rec *Record, req Req) (Res, error) {
		return op(s.tree(rec), ctx, req)
	}, req)
}

// tree is the worktree of rec. The file and search operations go through
// it; git goes through the Changes port.
func (s *Service) tree(rec *Record) *Tree {
	return &Tree{dir: rec.Dir, gitDir: rec.GitDir, readCap: s.cfg.ReadCap, engine: s.search, git: s.git}
}

// ReadFile reads a file of the workspace.
func (s *Service) ReadFile(ctx context.Context, id string, req ReadFileRequest) (ReadFileResult, error) {
	return onTree(ctx, s, id, reading, (*Tree).ReadFile, req)
}

// WriteFile writes a file of the workspace.
func (s *Service) WriteFile(ctx context.Context, id string, req WriteFileRequest) (WriteFileResult, error) {
	return onTree(ctx, s, id, writing, (*Tree).WriteFile, req)
}

// StrReplace replaces the occurrences of req.Old in a file; see
// StrReplaceRequest.
func (s *Service) StrReplace(ctx context.Context, id string, req StrReplaceRequest) (StrReplaceResult, error) {
	return onTree(ctx, s, id, writing, (*Tree).StrReplace, req)
}

// ListDir lists a directory of the workspace.
func (s *Service) ListDir(ctx context.Context, id string, req ListDirRequest) (ListDirResult, error) {
	return onTree(ctx, s, id, reading, (*Tree).ListDir, req)
}

// Stat describes a path of the workspace.
func (s *Service) Stat(ctx context.Context, id string, req PathRequest) (StatResult, error) {
	return onTree(ctx, s, id, reading, (*Tree).Stat, req)
}

// Exists reports whether a path of the workspace exists.
func (s *Service) Exists(ctx context.Context, id string, req PathRequest) (ExistsResult, error) {
	return onTree(ctx, s, id, reading, (*Tree).Exists, req)
}

// Readdir lists the names in a directory of the workspace.
func (s *Service) Readdir(ctx context.Context, id string, req PathRequest) (ReaddirResult, error) {
	return onTree(ctx, s, id, reading, (*Tree).Readdir, req)
}

// Mkdir creates a directory in the workspace.
func (s *Service) Mkdir(ctx context.Context, id string, req MkdirRequest) (PathResult, error) {
	return onTree(ctx, s, id, writing, (*Tree).Mkdir, req)
}

// Rm removes a path of the workspace.
func (s *Service) Rm(ctx context.Context, id string, req RmRequest) (PathResult, error) {
	return onTree(ctx, s, id, writing, (*Tree).Rm, req)
}

// Search searches the workspace's files.
func (s *Service) Search(ctx context.Context, id string, req SearchRequest) (SearchResult, error) {
	return onTree(ctx, s, id, reading, (*Tree).Search, req)
}

// GitStatus reports the workspace's changes.
func (s *Service) GitStatus(ctx context.Context, id string, req StatusRequest) (GitStatus, error) {
	return onWorkspace(ctx, s, id, reading, s.changes.Status, req)
}

// GitDiff returns the workspace's diff against HEAD or req.Ref.
func (s *Service) GitDiff(ctx context.Context, id string, req DiffRequest) (GitDiff, error) {
	return onWorkspace(ctx, s, id, reading, s.changes.Diff, req)
}

// GitCommit commits every change of the workspace on its branch.
func (s *Service) GitCommit(ctx context.Context, id string, req CommitRequest) (GitCommit, error) {
	if req.Message == "" {
		return GitCommit{}, protocol.Errorf(protocol.CodeInvalidPayload, "message is required")
	}
	return onWorkspace(ctx, s, id, writing, func(ctx context.Context, rec *Record, req CommitRequest) (GitCommit, error) {
		if rec.Branch == "" {
			return GitCommit{}, protocol.Errorf(protocol.CodeInvalidRef, "an analysis workspace has no branch to commit to; acquire an edit or task workspace")
		}
		return s.changes.Commit(ctx, rec, req.Message)
	}, req)
}

// GitPush pushes the workspace's branch.
func (s *Service) GitPush(ctx context.Context, id string, req PushRequest) (GitPush, error) {
	return onWorkspace(ctx, s, id, writing, func(ctx context.Context, rec *Record, req PushRequest) (GitPush, error) {
		return s.changes.Push(ctx, rec, req.Remote, req.AuthToken)
	}, req)
}
