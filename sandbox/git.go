//go:build !windows

package sandbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// LocalGit is the RepoCache and Worktrees on the local disk, driving the
// git binary. Every call disables hooks and fsmonitor and never prompts;
// an auth token travels to git in the environment of that one process as
// an http.extraHeader (GIT_CONFIG_COUNT), so it is never written to a
// config file, and it is redacted from every error.
type LocalGit struct {
	// Root is the sandbox root: caches go to Root/repos, worktrees to
	// Root/worktrees.
	Root string
	// Bin is the git binary; default "git" from PATH.
	Bin string
	// AuthorName and AuthorEmail sign the commits tether makes.
	AuthorName, AuthorEmail string
}

var (
	_ RepoCache = (*LocalGit)(nil)
	_ Worktrees = (*LocalGit)(nil)
)

// gitSafety is passed to every git call: nothing in a repository, its
// config or the agent's files can make tether's git run a program.
var gitSafety = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "protocol.ext.allow=never",
	"-c", "credential.helper=",
	"-c", "core.askPass=",
}

// gitEnvAllow are the variables of tether's own environment git may see.
var gitEnvAllow = []string{"PATH", "HOME", "TMPDIR", "SSH_AUTH_SOCK", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy", "GIT_SSL_CAINFO", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// gitCmd is one git invocation.
type gitCmd struct {
	dir    string // working directory, "" for none
	gitDir string
	work   string // --work-tree, "" for a bare call
	auth   string
	args   []string
	stdin  []byte
	// out, if set, receives stdout (capped) instead of run's result.
	out *CappedBuffer
}

func (g *LocalGit) bin() string {
	if g.Bin != "" {
		return g.Bin
	}
	return "git"
}

// run executes c and returns its stdout. Failures carry git's stderr,
// with the token redacted.
func (g *LocalGit) run(ctx context.Context, c gitCmd) ([]byte, error) {
	args := append([]string{}, gitSafety...)
	if c.gitDir != "" {
		args = append(args, "--git-dir="+c.gitDir)
	}
	if c.work != "" {
		args = append(args, "--work-tree="+c.work)
	}
	args = append(args, c.args...)
	cmd := exec.CommandContext(ctx, g.bin(), args...)
	cmd.Dir = c.dir
	cmd.Env = g.env(c.auth)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if c.stdin != nil {
		cmd.Stdin = bytes.NewReader(c.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if c.out != nil {
		cmd.Stdout = c.out
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		if ctx.Err() != nil {
			return stdout.Bytes(), fmt.Errorf("git %s: %w", c.args[0], ctx.Err())
		}
		return stdout.Bytes(), &GitError{Args: c.args[0], Stderr: redact(msg, c.auth), err: err}
	}
	return stdout.Bytes(), nil
}

func (g *LocalGit) env(auth string) []string {
	env := make([]string, 0, len(gitEnvAllow)+12)
	for _, k := range gitEnvAllow {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	name, email := g.AuthorName, g.AuthorEmail
	if name == "" {
		name = "tether agent"
	}
	if email == "" {
		email = "agent@tether.invalid"
	}
	env = append(env,
		"LC_ALL=C",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_SSH_COMMAND=ssh -o BatchMode=yes",
		"GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+email,
		"GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email,
	)
	if auth != "" {
		basic := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + auth))
		env = append(env, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+basic)
	}
	return env
}

// redact removes a token and its Basic encoding from s.
func redact(s, token string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "[redacted]")
	return strings.ReplaceAll(s, base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token)), "[redacted]")
}

// GitError is a git command that failed; Stderr is what it said, tokens
// redacted.
type GitError struct {
	Args   string
	Stderr string
	err    error
}

func (e *GitError) Error() string {
	return "git " + e.Args + ": " + e.Stderr + " (" + e.err.Error() + ")"
}
func (e *GitError) Unwrap() error { return e.err }

// Dir implements RepoCache.
func (g *LocalGit) Dir(repo Repo) string {
	return filepath.Join(g.Root, "repos", repo.Host, filepath.FromSlash(repo.Owner), repo.Name+".git")
}

// Ensure implements RepoCache: a bare clone with a fetch refspec into
// refs/remotes/origin, so the agent branches in refs/heads stay the
// cache's own. The clone goes to a temporary directory first, so a failed
// or interrupted clone never looks like a cache.
func (g *LocalGit) Ensure(ctx context.Context, repo Repo, auth string) (bool, error) {
	dir := g.Dir(repo)
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, fmt.Errorf("creating the repo cache directory: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".clone-")
	if err != nil {
		return false, fmt.Errorf("creating the repo cache directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	if _, err := g.run(ctx, gitCmd{auth: auth, args: []string{"clone", "--bare", "--quiet",
		"-c", "remote.origin.fetch=+refs/heads/*:refs/remotes/origin/*",
		"--", repo.URL, filepath.Join(tmp, "c.git")}}); err != nil {
		return false, fmt.Errorf("cloning %s: %w", repo.Key(), err)
	}
	_ = os.RemoveAll(dir) // a leftover without HEAD
	if err := os.Rename(filepath.Join(tmp, "c.git"), dir); err != nil {
		return false, fmt.Errorf("placing the repo cache: %w", err)
	}
	return true, nil
}

// Fetch implements RepoCache.
func (g *LocalGit) Fetch(ctx context.Context, repo Repo, auth string) error {
	_, err := g.run(ctx, gitCmd{gitDir: g.Dir(repo), auth: auth, args: []string{"fetch", "--quiet", "--prune", "origin"}})
	if err != nil {
		return fmt.Errorf("fetching %s: %w", repo.Key(), err)
	}
	return nil
}

// Resolve implements RepoCache.
func (g *LocalGit) Resolve(ctx context.Context, repo Repo, ref string) (string, string, error) {
	dir := g.Dir(repo)
	if ref == "" {
		out, err := g.run(ctx, gitCmd{gitDir: dir, args: []string{"--no-optional-locks", "symbolic-ref", "--quiet", "HEAD"}})
		if err != nil {
			return "", "", fmt.Errorf("finding the default branch of %s: %w", repo.Key(), err)
		}
		ref = strings.TrimPrefix(strings.TrimSpace(string(out)), "refs/heads/")
	}
	candidates := []string{"refs/remotes/origin/" + ref, "refs/tags/" + ref}
	if isHex(ref) && len(ref) >= 7 {
		candidates = append(candidates, ref)
	}
	for _, c := range candidates {
		out, err := g.run(ctx, gitCmd{gitDir: dir, args: []string{"--no-optional-locks", "rev-parse", "--verify", "--quiet", c + "^{commit}"}})
		if err == nil {
			return ref, strings.TrimSpace(string(out)), nil
		}
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
	}
	return "", "", protocol.Errorf(protocol.CodeInvalidRef, "base ref %q is not a branch, tag or commit of %s", ref, repo.Key())
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return s != ""
}

// Delete implements RepoCache.
func (g *LocalGit) Delete(_ context.Context, repo Repo) error {
	if err := os.RemoveAll(g.Dir(repo)); err != nil {
		return fmt.Errorf("removing the repo cache %s: %w", repo.Key(), err)
	}
	return nil
}

// Add implements Worktrees.
func (g *LocalGit) Add(ctx context.Context, repo Repo, dir, branch, commit string) (string, error) {
	cache := g.Dir(repo)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("creating the worktree directory: %w", err)
	}
	// A directory left by an interrupted add is not a worktree; git would
	// refuse a non-empty one.
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		_ = os.RemoveAll(dir)
		_, _ = g.run(ctx, gitCmd{gitDir: cache, args: []string{"worktree", "prune"}})
	}
	args := []string{"worktree", "add", "--quiet"}
	switch {
	case branch == "":
		args = append(args, "--detach", "--", dir, commit)
	default:
		_, err := g.run(ctx, gitCmd{gitDir: cache, args: []string{"--no-optional-locks", "rev-parse", "--verify", "--quiet", "refs/heads/" + branch}})
		if err == nil {
			args = append(args, "--", dir, branch) // resume the branch kept in the cache
		} else {
			args = append(args, "--no-track", "-b", branch, "--", dir, commit)
		}
	}
	if _, err := g.run(ctx, gitCmd{gitDir: cache, args: args}); err != nil {
		return "", fmt.Errorf("adding a worktree on %s: %w", repo.Key(), err)
	}
	return worktreeGitDir(dir)
}

// worktreeGitDir reads the git directory a fresh worktree points to.
func worktreeGitDir(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "", fmt.Errorf("reading the worktree's .git: %w", err)
	}
	gd, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !ok {
		return "", errors.New("the worktree's .git is not a gitdir file")
	}
	return gd, nil
}

// Remove implements Worktrees.
func (g *LocalGit) Remove(ctx context.Context, repo Repo, dir string) error {
	cache := g.Dir(repo)
	_, err := g.run(ctx, gitCmd{gitDir: cache, args: []string{"worktree", "remove", "--force", "--force", "--", dir}})
	if err != nil {
		// Whatever state the worktree is in, it goes: files, then metadata.
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			return fmt.Errorf("removing the worktree %s: %w", dir, rmErr)
		}
	}
	if _, err := g.run(ctx, gitCmd{gitDir: cache, args: []string{"worktree", "prune"}}); err != nil {
		return fmt.Errorf("pruning worktrees of %s: %w", repo.Key(), err)
	}
	return nil
}

// wt runs git in a workspace with an explicit git directory, so a .git
// file an agent rewrote cannot point tether's git elsewhere.
func (g *LocalGit) wt(ctx context.Context, rec *Record, auth string, args ...string) ([]byte, error) {
	return g.run(ctx, gitCmd{dir: rec.Dir, gitDir: rec.GitDir, work: rec.Dir, auth: auth, args: args})
}
