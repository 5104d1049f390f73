//go:build !windows

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

func TestAcquireTwiceReturnsSameWorkspaceWithOneClone(t *testing.T) {
	origin := makeOrigin(t, nil)
	cc := &countingCache{}
	e := newEnv(t, func(c *sandbox.Config) {
		cc.RepoCache = &sandbox.LocalGit{Root: c.Root}
		c.Cache = cc
	})
	req := sandbox.AcquireRequest{Repo: origin, Mode: sandbox.ModeAnalysis, UserID: "u1", ProjectID: "p1"}
	first := e.acquire(req)
	second := e.acquire(req)
	if !first.Created || second.Created {
		t.Fatalf("created = %v then %v, want true then false", first.Created, second.Created)
	}
	if first.WorkspaceID != second.WorkspaceID || first.Path != second.Path {
		t.Fatalf("two workspaces for one key: %+v / %+v", first, second)
	}
	if first.BaseRef != "main" || first.Branch != "" {
		t.Fatalf("analysis workspace: base_ref %q branch %q, want main and detached", first.BaseRef, first.Branch)
	}
	// A second analysis workspace on another base shares the cache.
	req.BaseRef = "feature"
	other := e.acquire(req)
	if other.WorkspaceID == first.WorkspaceID {
		t.Fatal("analysis workspaces on different base refs share an id")
	}
	if cc.clones != 1 {
		t.Fatalf("%d clones, want 1", cc.clones)
	}
	wantCaps := sandbox.Capabilities{Writable: true, Isolated: false, Network: true}
	if first.Capabilities != wantCaps {
		t.Fatalf("subprocess capabilities %+v, want %+v", first.Capabilities, wantCaps)
	}
	if _, err := os.Stat(filepath.Join(e.root, "repos", "local")); err != nil {
		t.Fatalf("cache not under repos/local: %v", err)
	}
}

func TestParallelEditWorkspacesOnOneRepo(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	branches := map[string]string{} // workspace id → branch
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conv := fmt.Sprintf("conv-%d", i%2)
			res, err := e.svc.AcquireWorkspace(ctx, editReq(origin, conv))
			if err != nil {
				errs <- fmt.Errorf("acquire %s: %w", conv, err)
				return
			}
			mu.Lock()
			branches[res.WorkspaceID] = res.Branch
			mu.Unlock()
			if _, err := e.svc.WriteFile(ctx, res.WorkspaceID, sandbox.WriteFileRequest{Path: fmt.Sprintf("notes/%d.txt", i), Content: "n"}); err != nil {
				errs <- fmt.Errorf("write: %w", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(branches) != 2 {
		t.Fatalf("%d workspaces for 2 conversations: %v", len(branches), branches)
	}
	seen := map[string]bool{}
	for id, b := range branches {
		if seen[b] {
			t.Fatalf("branch %s used twice", b)
		}
		seen[b] = true
		st, err := e.svc.GitStatus(ctx, id, sandbox.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Entries) != 10 {
			t.Fatalf("workspace %s on %s has %d changed files, want 10: %+v", id, b, len(st.Entries), st.Entries)
		}
	}
	if !seen["agent/edits-conv-0"] || !seen["agent/edits-conv-1"] {
		t.Fatalf("branches %v", seen)
	}
}

func TestEditCommitPushReachesOrigin(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	ws := e.acquire(editReq(origin, "c1"))
	id := ws.WorkspaceID
	must[sandbox.WriteFileResult](t)(e.svc.WriteFile(ctx, id, sandbox.WriteFileRequest{Path: "docs/new.md", Content: "fresh words\n"}))
	rep := must[sandbox.StrReplaceResult](t)(e.svc.StrReplace(ctx, id, sandbox.StrReplaceRequest{Path: "lib/util.go", Old: "Answer = 42", New: "Answer = 43"}))
	if rep.Line != 4 {
		t.Fatalf("replacement reported at line %d, want 4", rep.Line)
	}
	hits := must[sandbox.SearchResult](t)(e.svc.Search(ctx, id, sandbox.SearchRequest{Pattern: `Answer = \d+`}))
	if len(hits.Hits) != 1 || hits.Hits[0].Path != "lib/util.go" || hits.Hits[0].Line != 4 || !strings.Contains(hits.Hits[0].Text, "43") {
		t.Fatalf("search hits %+v", hits)
	}
	diff := must[sandbox.GitDiff](t)(e.svc.GitDiff(ctx, id, sandbox.DiffRequest{}))
	if !strings.Contains(diff.Diff, "+const Answer = 43") || len(diff.Untracked) != 1 || diff.Untracked[0] != "docs/new.md" {
		t.Fatalf("diff %+v", diff)
	}
	c := must[sandbox.GitCommit](t)(e.svc.GitCommit(ctx, id, sandbox.CommitRequest{Message: "agent: bump answer"}))
	if !c.Committed || c.Branch != "agent/edits-c1" {
		t.Fatalf("commit %+v", c)
	}
	st := must[sandbox.GitStatus](t)(e.svc.GitStatus(ctx, id, sandbox.StatusRequest{}))
	if !st.Clean {
		t.Fatalf("status after commit: %+v", st)
	}
	p := must[sandbox.GitPush](t)(e.svc.GitPush(ctx, id, sandbox.PushRequest{}))
	if p.Commit != c.Commit {
		t.Fatalf("pushed %s, committed %s", p.Commit, c.Commit)
	}
	if got := gitT(t, origin, "log", "-1", "--format=%H %s", "agent/edits-c1"); got != c.Commit+" agent: bump answer" {
		t.Fatalf("origin has %q", got)
	}
	if got := gitT(t, origin, "show", "agent/edits-c1:lib/util.go"); !strings.Contains(got, "Answer = 43") {
		t.Fatalf("origin's file: %q", got)
	}
}

func TestDestroyThenAcquireResumesBranchFromCache(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	ws := e.acquire(editReq(origin, "c2"))
	must[sandbox.WriteFileResult](t)(e.svc.WriteFile(ctx, ws.WorkspaceID, sandbox.WriteFileRequest{Path: "kept.txt", Content: "committed\n"}))
	must[sandbox.GitCommit](t)(e.svc.GitCommit(ctx, ws.WorkspaceID, sandbox.CommitRequest{Message: "keep"}))
	if err := e.svc.Destroy(ctx, ws.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.Path); !os.IsNotExist(err) {
		t.Fatalf("worktree still there after destroy: %v", err)
	}
	_, err := e.svc.ReadFile(ctx, ws.WorkspaceID, sandbox.ReadFileRequest{Path: "kept.txt"})
	wantCode(t, err, protocol.CodeWorkspaceNotFound)
	again := e.acquire(editReq(origin, "c2"))
	if !again.Created {
		t.Fatal("acquire after destroy did not create a worktree")
	}
	got := must[sandbox.ReadFileResult](t)(e.svc.ReadFile(ctx, again.WorkspaceID, sandbox.ReadFileRequest{Path: "kept.txt"}))
	if got.Content != "committed\n" {
		t.Fatalf("the branch kept in the cache lost its commit: %q", got.Content)
	}
}

func TestRestartKeepsWorkspaceAndUncommittedEdit(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	ws := e.acquire(editReq(origin, "c3"))
	must[sandbox.WriteFileResult](t)(e.svc.WriteFile(ctx, ws.WorkspaceID, sandbox.WriteFileRequest{Path: "wip.txt", Content: "not committed\n"}))
	if err := e.svc.Release(ctx, ws.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	e.restart()
	list := e.svc.List(sandbox.ListRequest{UserID: "u1"})
	if len(list.Workspaces) != 1 || list.Workspaces[0].ID != ws.WorkspaceID {
		t.Fatalf("after restart the store lists %+v", list)
	}
	again := e.acquire(editReq(origin, "c3"))
	if again.Created || again.WorkspaceID != ws.WorkspaceID {
		t.Fatalf("after restart: %+v", again)
	}
	got := must[sandbox.ReadFileResult](t)(e.svc.ReadFile(ctx, ws.WorkspaceID, sandbox.ReadFileRequest{Path: "wip.txt"}))
	if got.Content != "not committed\n" {
		t.Fatalf("uncommitted edit lost: %q", got.Content)
	}
	res := must[sandbox.ExecResult](t)(e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: "cat wip.txt"}))
	if !res.Success || res.Output != "not committed\n" {
		t.Fatalf("exec after restart: %+v", res)
	}
}

func TestSecondServiceOnOneRootIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := sandbox.New(sandbox.Config{Root: e.root}); err == nil {
		t.Fatal("two services opened one root")
	}
}

func TestFilePathsStayInsideWorktree(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	ws := e.acquire(editReq(origin, "c4"))
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws.Path, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ws.Path, "pw")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../../etc/passwd", "/etc/passwd", "out/secret", "pw", "lib/../../x"} {
		_, err := e.svc.ReadFile(ctx, ws.WorkspaceID, sandbox.ReadFileRequest{Path: p})
		wantCode(t, err, protocol.CodeInvalidPath)
	}
	_, err := e.svc.WriteFile(ctx, ws.WorkspaceID, sandbox.WriteFileRequest{Path: "out/planted", Content: "x"})
	wantCode(t, err, protocol.CodeInvalidPath)
	if _, err := os.Stat(filepath.Join(outside, "planted")); !os.IsNotExist(err) {
		t.Fatal("a write through a symlink landed outside the worktree")
	}
	_, err = e.svc.ListDir(ctx, ws.WorkspaceID, sandbox.ListDirRequest{Path: "out"})
	wantCode(t, err, protocol.CodeInvalidPath)
	_, err = e.svc.Rm(ctx, ws.WorkspaceID, sandbox.RmRequest{Path: "out/secret"})
	wantCode(t, err, protocol.CodeInvalidPath)
	_, err = e.svc.WriteFile(ctx, ws.WorkspaceID, sandbox.WriteFileRequest{Path: ".git", Content: "gitdir: /tmp/evil"})
	wantCode(t, err, protocol.CodeInvalidPath)
	_, err = e.svc.Search(ctx, ws.WorkspaceID, sandbox.SearchRequest{Pattern: "s", Path: "out"})
	wantCode(t, err, protocol.CodeInvalidPath)
	_, err = e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: "true", Cwd: "out"})
	wantCode(t, err, protocol.CodeInvalidPath)
	// A symlink that stays inside is followed.
	if err := os.Symlink("lib/util.go", filepath.Join(ws.Path, "inside")); err != nil {
		t.Fatal(err)
	}
	got := must[sandbox.ReadFileResult](t)(e.svc.ReadFile(ctx, ws.WorkspaceID, sandbox.ReadFileRequest{Path: "inside"}))
	if !strings.Contains(got.Content, "Answer") {
		t.Fatalf("inside symlink: %q", got.Content)
	}
}

func TestAcquireRejectsBadRefs(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	for _, ref := range []string{"--upload-pack=x", "a..b", "x\ny", "-b", "a b", "refs/heads/x.lock", "@{1}"} {
		req := editReq(origin, "c5")
		req.BaseRef = ref
		_, err := e.svc.AcquireWorkspace(context.Background(), req)
		wantCode(t, err, protocol.CodeInvalidRef)
	}
	for _, conv := range []string{"--upload-pack=x", "a..b", "x\ny", "", "../x", "a/b"} {
		_, err := e.svc.AcquireWorkspace(context.Background(), editReq(origin, conv))
		wantCode(t, err, protocol.CodeInvalidRef)
	}
	for _, repo := range []string{"--upload-pack=touch /tmp/x", "ext::sh -c touch% /tmp/pwned", "relative/path", "https://user:pw@example.com/o/r.git", "https://example.com/o/r\n"} {
		req := editReq(repo, "c5")
		_, err := e.svc.AcquireWorkspace(context.Background(), req)
		wantCode(t, err, protocol.CodeInvalidRef)
	}
	if entries, _ := os.ReadDir(filepath.Join(e.root, "repos")); len(entries) != 0 {
		t.Fatalf("a rejected acquire left %v in repos/", entries)
	}
}

func TestAuthTokenNeverStoredOrLogged(t *testing.T) {
	const tok = "tok-SECRET-1234567890"
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	req := editReq(origin, "c6")
	req.AuthToken = tok
	ws := e.acquire(req)
	must[sandbox.WriteFileResult](t)(e.svc.WriteFile(ctx, ws.WorkspaceID, sandbox.WriteFileRequest{Path: "a.txt", Content: "a"}))
	must[sandbox.GitCommit](t)(e.svc.GitCommit(ctx, ws.WorkspaceID, sandbox.CommitRequest{Message: "a"}))
	must[sandbox.GitPush](t)(e.svc.GitPush(ctx, ws.WorkspaceID, sandbox.PushRequest{AuthToken: tok}))
	// A failing clone over HTTP with the token: the error must not carry it.
	bad := editReq("http://127.0.0.1:1/owner/repo.git", "c6")
	bad.AuthToken = tok
	_, err := e.svc.AcquireWorkspace(ctx, bad)
	if err == nil || strings.Contains(err.Error(), tok) {
		t.Fatalf("clone of an unreachable URL: %v", err)
	}
	if err := e.svc.Close(); err != nil {
		t.Fatal(err)
	}
	e.svc = nil
	// Every file tether wrote: the store, caches, worktrees.
	err = filepath.WalkDir(e.root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), tok) {
			t.Errorf("the token is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.logs.String(), tok) {
		t.Error("the token is in the logs")
	}
	if !strings.Contains(e.logs.String(), "sandbox workspace created") {
		t.Error("the log sink saw nothing; the check above proves nothing")
	}
	if data, err := os.ReadFile(filepath.Join(e.root, "store.json")); err != nil || !strings.Contains(string(data), ws.WorkspaceID) {
		t.Fatalf("store.json does not hold the workspace (%v)", err)
	}
}

func TestStrReplaceNeedsOneOccurrence(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	ws := e.acquire(editReq(origin, "c7"))
	must[sandbox.WriteFileResult](t)(e.svc.WriteFile(ctx, ws.WorkspaceID, sandbox.WriteFileRequest{Path: "twice.txt", Content: "x\nx\n"}))
	_, err := e.svc.StrReplace(ctx, ws.WorkspaceID, sandbox.StrReplaceRequest{Path: "twice.txt", Old: "x", New: "y"})
	wantCode(t, err, protocol.CodeAmbiguousMatch)
	_, err = e.svc.StrReplace(ctx, ws.WorkspaceID, sandbox.StrReplaceRequest{Path: "twice.txt", Old: "z", New: "y"})
	wantCode(t, err, protocol.CodeNoMatch)
	got := must[sandbox.ReadFileResult](t)(e.svc.ReadFile(ctx, ws.WorkspaceID, sandbox.ReadFileRequest{Path: "twice.txt"}))
	if got.Content != "x\nx\n" {
		t.Fatalf("a failed replace changed the file: %q", got.Content)
	}
}

func TestFileOperations(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	id := e.acquire(editReq(origin, "c8")).WorkspaceID
	bin := []byte{0, 1, 2, 0xff, 0xfe}
	must[sandbox.WriteFileResult](t)(e.svc.WriteFile(ctx, id, sandbox.WriteFileRequest{Path: "bin/blob", Content: "AAEC//4=", Encoding: "base64"}))
	got := must[sandbox.ReadFileResult](t)(e.svc.ReadFile(ctx, id, sandbox.ReadFileRequest{Path: "bin/blob"}))
	if got.Encoding != "base64" || got.Content != "AAEC//4=" || got.Size != int64(len(bin)) {
		t.Fatalf("binary read %+v", got)
	}
	lines := must[sandbox.ReadFileResult](t)(e.svc.ReadFile(ctx, id, sandbox.ReadFileRequest{Path: "main.go", StartLine: 3, EndLine: 4}))
	if lines.Content != "func main() {\n\tprintln(\"hello\")\n" || lines.TotalLines != 5 {
		t.Fatalf("line range %+v", lines)
	}
	must[sandbox.PathResult](t)(e.svc.Mkdir(ctx, id, sandbox.MkdirRequest{Path: "a/b/c", Recursive: true}))
	_, err := e.svc.Mkdir(ctx, id, sandbox.MkdirRequest{Path: "x/y"})
	wantCode(t, err, protocol.CodeInvalidPath)
	ls := must[sandbox.ListDirResult](t)(e.svc.ListDir(ctx, id, sandbox.ListDirRequest{Path: "a", Depth: 5}))
	if len(ls.Entries) != 2 || ls.Entries[1].Path != "a/b/c" || ls.Entries[1].Type != "dir" {
		t.Fatalf("list %+v", ls)
	}
	top := must[sandbox.ListDirResult](t)(e.svc.ListDir(ctx, id, sandbox.ListDirRequest{}))
	for _, en := range top.Entries {
		if strings.Contains(en.Path, "/") {
			t.Fatalf("depth 1 listed %s", en.Path)
		}
	}
	st := must[sandbox.StatResult](t)(e.svc.Stat(ctx, id, sandbox.PathRequest{Path: "main.go"}))
	if st.Type != "file" || st.Size == 0 {
		t.Fatalf("stat %+v", st)
	}
	if ex := must[sandbox.ExistsResult](t)(e.svc.Exists(ctx, id, sandbox.PathRequest{Path: "nope"})); ex.Exists {
		t.Fatal("exists(nope)")
	}
	if ex := must[sandbox.ExistsResult](t)(e.svc.Exists(ctx, id, sandbox.PathRequest{Path: "a/b"})); !ex.Exists || ex.Type != "dir" {
		t.Fatalf("exists(a/b) %+v", ex)
	}
	_, err = e.svc.Rm(ctx, id, sandbox.RmRequest{Path: "a"})
	if err == nil {
		t.Fatal("non-recursive rm of a non-empty directory succeeded")
	}
	must[sandbox.PathResult](t)(e.svc.Rm(ctx, id, sandbox.RmRequest{Path: "a", Recursive: true}))
	must[sandbox.PathResult](t)(e.svc.Rm(ctx, id, sandbox.RmRequest{Path: "a", Force: true}))
	_, err = e.svc.Rm(ctx, id, sandbox.RmRequest{Path: "a"})
	wantCode(t, err, protocol.CodeInvalidPath)
}

func TestSearchGoFallbackMatchesRipgrep(t *testing.T) {
	origin := makeOrigin(t, nil)
	rg := newEnv(t, nil)
	goEnv := newEnv(t, func(c *sandbox.Config) { c.RgBin = "-" })
	ctx := context.Background()
	for _, e := range []*env{rg, goEnv} {
		id := e.acquire(editReq(origin, "c9")).WorkspaceID
		res := must[sandbox.SearchResult](t)(e.svc.Search(ctx, id, sandbox.SearchRequest{Pattern: "answer", CaseInsensitive: true}))
		if len(res.Hits) != 2 || res.Hits[0].Path != "lib/util.go" {
			t.Fatalf("%s search: %+v", res.Engine, res)
		}
		none := must[sandbox.SearchResult](t)(e.svc.Search(ctx, id, sandbox.SearchRequest{Pattern: "zzz-not-there", Fixed: true}))
		if len(none.Hits) != 0 {
			t.Fatalf("%s: hits for a missing string", none.Engine)
		}
	}
}

func TestExecEnvTimeoutAndCap(t *testing.T) {
	t.Setenv("TETHER_TEST_SECRET", "do-not-leak")
	origin := makeOrigin(t, nil)
	e := newEnv(t, func(c *sandbox.Config) { c.OutputCap = 300 })
	ctx := context.Background()
	id := e.acquire(editReq(origin, "c10")).WorkspaceID
	res := must[sandbox.ExecResult](t)(e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "env; pwd", Env: map[string]string{"MINE": "1"}}))
	if strings.Contains(res.Output, "do-not-leak") {
		t.Fatal("the command saw a variable outside the allow-list")
	}
	res = must[sandbox.ExecResult](t)(e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "echo $MINE; pwd", Cwd: "lib", Env: map[string]string{"MINE": "1"}}))
	if !res.Success || !strings.HasPrefix(res.Output, "1\n") || !strings.HasSuffix(strings.TrimSpace(res.Output), "/lib") {
		t.Fatalf("env/cwd: %+v", res)
	}
	res = must[sandbox.ExecResult](t)(e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "sleep 30 & sleep 30", Timeout: 0.3}))
	if !res.TimedOut || res.Success || res.DurationMS > 5000 {
		t.Fatalf("timeout: %+v", res)
	}
	res = must[sandbox.ExecResult](t)(e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "seq 1 1000; exit 3"}))
	if !res.Truncated || len(res.Output) != 300 || res.ExitCode != 3 || res.Success {
		t.Fatalf("cap/exit: %+v", res)
	}
}

func TestWorkspaceOperationsTakeTheTreeOptions(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	id := e.acquire(editReq(origin, "c10")).WorkspaceID
	read := must[sandbox.ReadFileResult](t)(e.svc.ReadFile(ctx, id, sandbox.ReadFileRequest{Path: "main.go", StartLine: 3, EndLine: 3, LineNumbers: true}))
	if read.Content != "     3\tfunc main() {\n" || read.TotalLines != 5 {
		t.Fatalf("read-file with line numbers: %+v", read)
	}
	rep := must[sandbox.StrReplaceResult](t)(e.svc.StrReplace(ctx, id, sandbox.StrReplaceRequest{Path: "main.go", Old: "main", New: "Main", ExpectedCount: 2}))
	if rep.Replacements != 2 || rep.Line != 1 {
		t.Fatalf("str-replace expected_count 2: %+v", rep)
	}
	names := must[sandbox.ReaddirResult](t)(e.svc.Readdir(ctx, id, sandbox.PathRequest{Path: "lib"}))
	if strings.Join(names.Names, ",") != "util.go" {
		t.Fatalf("readdir: %+v", names)
	}
	st := must[sandbox.StatResult](t)(e.svc.Stat(ctx, id, sandbox.PathRequest{Path: "lib"}))
	if !st.IsDirectory || st.MtimeMS == 0 {
		t.Fatalf("stat: %+v", st)
	}
	hits := must[sandbox.SearchResult](t)(e.svc.Search(ctx, id, sandbox.SearchRequest{Pattern: "Answer =", Context: 1}))
	if len(hits.Hits) != 1 || strings.Join(hits.Hits[0].Before, "") != "// Answer is the answer." {
		t.Fatalf("search with context: %+v", hits)
	}
	diff := must[sandbox.GitDiff](t)(e.svc.GitDiff(ctx, id, sandbox.DiffRequest{Ref: "HEAD", Path: "main.go"}))
	if !strings.Contains(diff.Diff, "+package Main") {
		t.Fatalf("diff against HEAD of main.go: %+v", diff)
	}
	_, err := e.svc.GitDiff(ctx, id, sandbox.DiffRequest{Ref: "a..b"})
	wantCode(t, err, protocol.CodeInvalidRef)
	status := must[sandbox.GitStatus](t)(e.svc.GitStatus(ctx, id, sandbox.StatusRequest{Path: "lib"}))
	if !status.Clean || status.Branch != "agent/edits-c10" {
		t.Fatalf("status of lib (unchanged): %+v", status)
	}
}
