//go:build !windows

package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tetherdev/tether/protocol"
)

var _ Changes = (*LocalGit)(nil)

// maxDiff caps a diff result, so that with the rest of the answer it
// fits the broker's default maxPayload (1 MB) after JSON encoding.
const maxDiff = 256 << 10

// Status implements Changes.
func (g *LocalGit) Status(ctx context.Context, rec *Record, req StatusRequest) (GitStatus, error) {
	st, err := g.status(ctx, rec.Dir, rec.GitDir, req)
	st.Branch = rec.Branch
	return st, err
}

// Diff implements Changes.
func (g *LocalGit) Diff(ctx context.Context, rec *Record, req DiffRequest) (GitDiff, error) {
	return g.diff(ctx, rec.Dir, rec.GitDir, req)
}

// GitStatus reports the changes in the tree (the part of its repository
// below the tree's directory). A directory in no repository answers
// not_a_repository.
func (t *Tree) GitStatus(ctx context.Context, req StatusRequest) (GitStatus, error) {
	st, err := t.git.status(ctx, t.dir, t.gitDir, req)
	if err != nil {
		return GitStatus{}, err
	}
	if out, err := t.git.inTree(ctx, t.dir, t.gitDir, "--no-optional-locks", "symbolic-ref", "--quiet", "--short", "HEAD"); err == nil {
		st.Branch = strings.TrimSpace(string(out)) // none when detached
	}
	return st, nil
}

// GitDiff returns the tree's diff against HEAD or req.Ref.
func (t *Tree) GitDiff(ctx context.Context, req DiffRequest) (GitDiff, error) {
	return t.git.diff(ctx, t.dir, t.gitDir, req)
}

// inTree runs git for the tree at dir: with gitDir, as the work tree of
// that git directory (sandbox worktrees, so a .git an agent rewrote cannot
// point tether's git elsewhere); without, from dir, letting git find the
// repository.
func (g *LocalGit) inTree(ctx context.Context, dir, gitDir string, args ...string) ([]byte, error) {
	return g.run(ctx, g.treeCmd(dir, gitDir, args...))
}

func (g *LocalGit) treeCmd(dir, gitDir string, args ...string) gitCmd {
	c := gitCmd{dir: dir, args: args}
	if gitDir != "" {
		c.gitDir, c.work = gitDir, dir
	}
	return c
}

// prefix returns where dir sits in its repository ("" at the top, else
// "sub/dir/"), or not_a_repository.
func (g *LocalGit) prefix(ctx context.Context, dir, gitDir string) (string, error) {
	if gitDir != "" {
		return "", nil // a sandbox worktree: dir is its top
	}
	out, err := g.inTree(ctx, dir, gitDir, "--no-optional-locks", "rev-parse", "--show-prefix")
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", protocol.Errorf(protocol.CodeNotARepository, "git: %s is not in a git repository (%v)", dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// pathspec checks the optional path of a git request: "." for the whole
// tree.
func pathspec(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	return CleanPath(p)
}

func (g *LocalGit) status(ctx context.Context, dir, gitDir string, req StatusRequest) (GitStatus, error) {
	spec, err := pathspec(req.Path)
	if err != nil {
		return GitStatus{}, err
	}
	prefix, err := g.prefix(ctx, dir, gitDir)
	if err != nil {
		return GitStatus{}, err
	}
	out, err := g.inTree(ctx, dir, gitDir, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", spec)
	if err != nil {
		return GitStatus{}, fmt.Errorf("git status: %w", err)
	}
	st := GitStatus{Entries: []StatusEntry{}}
	fields := strings.Split(string(out), "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		// Porcelain paths are relative to the repository's top; the
		// pathspec kept only those below dir.
		e := StatusEntry{Status: f[:2], Path: strings.TrimPrefix(f[3:], prefix)}
		if f[0] == 'R' || f[0] == 'C' {
			i++ // the rename's source follows
		}
		st.Entries = append(st.Entries, e)
	}
	st.Clean = len(st.Entries) == 0
	head, err := g.inTree(ctx, dir, gitDir, "--no-optional-locks", "rev-parse", "HEAD")
	if err == nil {
		st.Head = strings.TrimSpace(string(head))
	}
	return st, nil
}

func (g *LocalGit) diff(ctx context.Context, dir, gitDir string, req DiffRequest) (GitDiff, error) {
	spec, err := pathspec(req.Path)
	if err != nil {
		return GitDiff{}, err
	}
	ref := "HEAD"
	if req.Ref != "" {
		if err := ValidateRevision(req.Ref); err != nil {
			return GitDiff{}, err
		}
		ref = req.Ref
	}
	if _, err := g.prefix(ctx, dir, gitDir); err != nil {
		return GitDiff{}, err
	}
	if _, err := g.inTree(ctx, dir, gitDir, "--no-optional-locks", "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err != nil {
		if ctx.Err() != nil {
			return GitDiff{}, ctx.Err()
		}
		return GitDiff{}, protocol.Errorf(protocol.CodeInvalidRef, "ref %q is not a commit of this repository", ref)
	}
	// --relative: paths relative to dir, and nothing outside it.
	args := []string{"--no-optional-locks", "diff", "--no-ext-diff", "--no-textconv", "--no-color", "--relative"}
	if req.Staged {
		args = append(args, "--cached")
	}
	c := g.treeCmd(dir, gitDir, append(args, ref, "--", spec)...)
	c.out = NewCappedBuffer(maxDiff)
	if _, err := g.run(ctx, c); err != nil {
		return GitDiff{}, fmt.Errorf("git diff: %w", err)
	}
	d := GitDiff{Diff: c.out.String(), Untracked: []string{}, Truncated: c.out.Truncated()}
	if out, err := g.inTree(ctx, dir, gitDir, "--no-optional-locks", "ls-files", "--others", "--exclude-standard", "-z", "--", spec); err == nil {
		for _, p := range strings.Split(string(out), "\x00") {
			if p != "" {
				d.Untracked = append(d.Untracked, p)
			}
		}
	}
	return d, nil
}

// Commit implements Changes: every change in the worktree, untracked
// files included, becomes one commit on the workspace's branch.
func (g *LocalGit) Commit(ctx context.Context, rec *Record, message string) (GitCommit, error) {
	if _, err := g.wt(ctx, rec, "", "add", "--all"); err != nil {
		return GitCommit{}, fmt.Errorf("git add: %w", err)
	}
	res := GitCommit{Branch: rec.Branch}
	if _, err := g.wt(ctx, rec, "", "diff", "--cached", "--quiet"); err == nil {
		res.Message = "nothing to commit"
	} else {
		if _, err := g.run(ctx, gitCmd{dir: rec.Dir, gitDir: rec.GitDir, work: rec.Dir, stdin: []byte(message),
			args: []string{"commit", "--quiet", "--no-verify", "--file=-"}}); err != nil {
			return GitCommit{}, fmt.Errorf("git commit: %w", err)
		}
		res.Committed = true
	}
	out, err := g.wt(ctx, rec, "", "rev-parse", "HEAD")
	if err != nil {
		return GitCommit{}, fmt.Errorf("git rev-parse: %w", err)
	}
	res.Commit = strings.TrimSpace(string(out))
	return res, nil
}

// Push implements Changes: HEAD goes to the workspace's branch on the
// remote.
func (g *LocalGit) Push(ctx context.Context, rec *Record, remote, auth string) (GitPush, error) {
	if rec.Branch == "" {
		return GitPush{}, protocol.Errorf(protocol.CodeInvalidRef, "an analysis workspace has no branch to push")
	}
	if remote == "" {
		remote = "origin"
	}
	if err := validateRemote(remote); err != nil {
		return GitPush{}, err
	}
	if _, err := g.wt(ctx, rec, auth, "push", "--quiet", "--no-verify", "--", remote, "HEAD:refs/heads/"+rec.Branch); err != nil {
		return GitPush{}, fmt.Errorf("git push: %w", err)
	}
	out, err := g.wt(ctx, rec, "", "rev-parse", "HEAD")
	if err != nil {
		return GitPush{}, fmt.Errorf("git rev-parse: %w", err)
	}
	return GitPush{Remote: remote, Branch: rec.Branch, Commit: strings.TrimSpace(string(out))}, nil
}

// SavePatch implements Changes. It stages everything (the worktree is
// about to go) and writes the staged diff against HEAD, binary files
// included, to path.
func (g *LocalGit) SavePatch(ctx context.Context, rec *Record, path string) error {
	if _, err := g.wt(ctx, rec, "", "add", "--all"); err != nil {
		return fmt.Errorf("git add: %w", err)
	}
	out, err := g.wt(ctx, rec, "", "diff", "--cached", "--binary", "--no-ext-diff", "--no-textconv", "HEAD")
	if err != nil {
		return fmt.Errorf("git diff: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the artifact directory: %w", err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("writing the patch artifact: %w", err)
	}
	return nil
}
