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

// GitStatus answers git/status.
type GitStatus struct {
	Branch string `json:"branch"`
	Head   string `json:"head"`
	Clean  bool   `json:"clean"`
	// Entries are `git status --porcelain` lines split into the two-letter
	// status and the path.
	Entries []StatusEntry `json:"entries"`
}

// StatusEntry is one changed path.
type StatusEntry struct {
	Status string `json:"status"`
	Path   string `json:"path"`
}

// DiffRequest is the payload of git/diff.
type DiffRequest struct {
	// Staged shows the index against HEAD instead of the worktree against
	// HEAD.
	Staged bool `json:"staged,omitempty"`
	// Path limits the diff to one file or directory.
	Path string `json:"path,omitempty"`
}

// GitDiff answers git/diff: the diff of tracked files against HEAD, and
// the untracked files (not in the diff).
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

// maxDiff caps a diff result.
const maxDiff = 1 << 20

// Status implements Changes.
func (g *LocalGit) Status(ctx context.Context, rec *Record) (GitStatus, error) {
	out, err := g.wt(ctx, rec, "", "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all")
	if err != nil {
		return GitStatus{}, fmt.Errorf("git status: %w", err)
	}
	st := GitStatus{Branch: rec.Branch, Entries: []StatusEntry{}}
	fields := strings.Split(string(out), "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		e := StatusEntry{Status: f[:2], Path: f[3:]}
		if f[0] == 'R' || f[0] == 'C' {
			i++ // the rename's source follows
		}
		st.Entries = append(st.Entries, e)
	}
	st.Clean = len(st.Entries) == 0
	head, err := g.wt(ctx, rec, "", "--no-optional-locks", "rev-parse", "HEAD")
	if err == nil {
		st.Head = strings.TrimSpace(string(head))
	}
	return st, nil
}

// Diff implements Changes.
func (g *LocalGit) Diff(ctx context.Context, rec *Record, req DiffRequest) (GitDiff, error) {
	args := []string{"--no-optional-locks", "diff", "--no-ext-diff", "--no-textconv", "--no-color"}
	if req.Staged {
		args = append(args, "--cached")
	}
	args = append(args, "HEAD", "--")
	var rel string
	if req.Path != "" {
		var err error
		if rel, err = CleanPath(req.Path); err != nil {
			return GitDiff{}, err
		}
		args = append(args, rel)
	}
	out, err := g.wt(ctx, rec, "", args...)
	if err != nil {
		return GitDiff{}, fmt.Errorf("git diff: %w", err)
	}
	d := GitDiff{Diff: string(out), Untracked: []string{}}
	if len(d.Diff) > maxDiff {
		d.Diff, d.Truncated = d.Diff[:maxDiff], true
	}
	uargs := []string{"--no-optional-locks", "ls-files", "--others", "--exclude-standard", "-z", "--"}
	if rel != "" {
		uargs = append(uargs, rel)
	}
	if out, err := g.wt(ctx, rec, "", uargs...); err == nil {
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
