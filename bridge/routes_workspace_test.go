//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/gittest"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// workspaceCall dispatches a workspace call with a raw JSON payload.
func workspaceCall(t testing.TB, b *bridge.Bridge, endpoint, payload string) protocol.ToolResponse {
	t.Helper()
	return b.Dispatch(context.Background(), protocol.ToolCall{
		CorrelationID: "ws-" + endpoint, Endpoint: endpoint, Payload: json.RawMessage(payload), Timeout: 30,
	})
}

// workspaceOK dispatches a call that must succeed and decodes its result.
func workspaceOK[T any](t testing.TB, b *bridge.Bridge, endpoint, payload string) T {
	t.Helper()
	resp := workspaceCall(t, b, endpoint, payload)
	if !resp.Success {
		t.Fatalf("%s %s: %s: %s", endpoint, payload, resp.Error, resp.Message)
	}
	var v T
	if err := json.Unmarshal(resp.Result, &v); err != nil {
		t.Fatalf("%s: decoding %s: %v", endpoint, resp.Result, err)
	}
	return v
}

// gitRoot makes a git repository holding main.go, committed, and returns
// its directory.
func gitRoot(t testing.TB) string {
	t.Helper()
	return gittest.Repo(t, map[string]string{"main.go": "package main\n\nconst Answer = 42\n"})
}

func TestWorkspaceRoutesServeTheRoot(t *testing.T) {
	root := gitRoot(t)
	b := startBridge(t, bridge.Config{Root: root}, nil)

	read := workspaceOK[sandbox.ReadFileResult](t, b, protocol.WorkspaceReadFileEndpoint, `{"path":"main.go","line_numbers":true,"start_line":3}`)
	if read.Content != "     3\tconst Answer = 42\n" || read.TotalLines != 3 || read.StartLine != 3 || read.EndLine != 3 {
		t.Fatalf("read-file: %+v", read)
	}
	rep := workspaceOK[sandbox.StrReplaceResult](t, b, protocol.WorkspaceStrReplaceEndpoint, `{"path":"main.go","old":"Answer = 42","new":"Answer = 43"}`)
	if rep.Replacements != 1 || rep.Line != 3 {
		t.Fatalf("str-replace: %+v", rep)
	}
	found := workspaceOK[sandbox.SearchResult](t, b, protocol.WorkspaceSearchEndpoint, `{"pattern":"Answer = 43","fixed":true}`)
	if len(found.Hits) != 1 || found.Rendered != "main.go:3: const Answer = 43\n" {
		t.Fatalf("search: %+v", found)
	}
	diff := workspaceOK[sandbox.GitDiff](t, b, protocol.WorkspaceGitDiffEndpoint, `{}`)
	if !strings.Contains(diff.Diff, "+const Answer = 43") || !strings.Contains(diff.Diff, "-const Answer = 42") {
		t.Fatalf("git diff: %+v", diff)
	}
	w := workspaceOK[sandbox.WriteFileResult](t, b, protocol.WorkspaceWriteFileEndpoint, `{"path":"docs/new.md","content":"hello\n"}`)
	if !w.Created || w.Bytes != 6 {
		t.Fatalf("write-file: %+v", w)
	}
	st := workspaceOK[sandbox.GitStatus](t, b, protocol.WorkspaceGitStatusEndpoint, `{}`)
	if st.Branch != "main" || st.Clean || len(st.Entries) != 2 {
		t.Fatalf("git status: %+v", st)
	}
	stat := workspaceOK[sandbox.StatResult](t, b, protocol.WorkspaceStatEndpoint, `{"path":"docs"}`)
	if !stat.IsDirectory || stat.IsSymlink || stat.MtimeMS == 0 {
		t.Fatalf("stat: %+v", stat)
	}
	names := workspaceOK[sandbox.ReaddirResult](t, b, protocol.WorkspaceReaddirEndpoint, `{"path":"."}`)
	if strings.Join(names.Names, ",") != ".git,docs,main.go" {
		t.Fatalf("readdir: %+v", names)
	}
	ls := workspaceOK[sandbox.ListDirResult](t, b, protocol.WorkspaceListDirEndpoint, `{"depth":2}`)
	if len(ls.Entries) != 4 { // .git (not entered), docs, docs/new.md, main.go
		t.Fatalf("list-dir: %+v", ls.Entries)
	}
	workspaceOK[sandbox.PathResult](t, b, protocol.WorkspaceMkdirEndpoint, `{"path":"a/b","recursive":true}`)
	if ex := workspaceOK[sandbox.ExistsResult](t, b, protocol.WorkspaceExistsEndpoint, `{"path":"a/b"}`); !ex.Exists {
		t.Fatal("a/b does not exist after mkdir")
	}
	workspaceOK[sandbox.PathResult](t, b, protocol.WorkspaceRmEndpoint, `{"path":"a","recursive":true}`)
	if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Fatalf("a is still there after rm: %v", err)
	}
}

func TestWorkspaceGitRoutesOnASubdirectoryAndOutsideARepository(t *testing.T) {
	repo := gitRoot(t)
	sub := filepath.Join(repo, "pkg")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "x.go"), []byte("package pkg\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "main.go"), []byte("changed outside pkg\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, bridge.Config{Root: sub}, nil)
	st := workspaceOK[sandbox.GitStatus](t, b, protocol.WorkspaceGitStatusEndpoint, `{}`)
	if len(st.Entries) != 1 || st.Entries[0].Path != "x.go" || st.Entries[0].Status != "??" {
		t.Fatalf("status of the pkg root, relative to it and without main.go: %+v", st)
	}
	diff := workspaceOK[sandbox.GitDiff](t, b, protocol.WorkspaceGitDiffEndpoint, `{"ref":"HEAD"}`)
	if diff.Diff != "" || len(diff.Untracked) != 1 || diff.Untracked[0] != "x.go" {
		t.Fatalf("diff of the pkg root shows what is outside it: %+v", diff)
	}
	wantFailure(t, workspaceCall(t, b, protocol.WorkspaceGitDiffEndpoint, `{"ref":"no-such-branch"}`), protocol.CodeInvalidRef)
	wantFailure(t, workspaceCall(t, b, protocol.WorkspaceGitDiffEndpoint, `{"ref":"--output=/tmp/x"}`), protocol.CodeInvalidRef)

	plain := startBridge(t, bridge.Config{Root: t.TempDir()}, nil)
	wantFailure(t, workspaceCall(t, plain, protocol.WorkspaceGitStatusEndpoint, `{}`), protocol.CodeNotARepository)
	wantFailure(t, workspaceCall(t, plain, protocol.WorkspaceGitDiffEndpoint, `{}`), protocol.CodeNotARepository)
}

func TestWorkspaceRoutesDecodeStrictly(t *testing.T) {
	root := t.TempDir()
	b := startBridge(t, bridge.Config{Root: root}, nil)
	for endpoint, payload := range map[string]string{
		protocol.WorkspaceReadFileEndpoint:     `{"path":"f","line_numbrs":true}`,
		protocol.WorkspaceStrReplaceEndpoint:   `{"path":"f","old":"a","new":"b","count":2}`,
		protocol.WorkspaceGitStatusEndpoint:    `{"porcelain":true}`,
		protocol.WorkspaceCapabilitiesEndpoint: `{"verbose":true}`,
	} {
		resp := workspaceCall(t, b, endpoint, payload)
		wantFailure(t, resp, protocol.CodeInvalidPayload)
		var field map[string]any
		_ = json.Unmarshal([]byte(payload), &field)
		for name := range field {
			if name != "path" && name != "old" && name != "new" && !strings.Contains(resp.Message, `"`+name+`"`) {
				t.Errorf("%s: message %q does not name the unknown field %s", endpoint, resp.Message, name)
			}
		}
	}
	wantFailure(t, workspaceCall(t, b, protocol.WorkspaceReadFileEndpoint, `{"path":"f"} {"path":"g"}`), protocol.CodeInvalidPayload)
	wantFailure(t, workspaceCall(t, b, protocol.WorkspaceReadFileEndpoint, `{"path":7}`), protocol.CodeInvalidPayload)
	wantFailure(t, workspaceCall(t, b, protocol.WorkspaceReadFileEndpoint, `[1]`), protocol.CodeInvalidPayload)
}

func TestWorkspacePathsOutsideTheRootAreRefused(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, bridge.Config{Root: root}, nil)
	long := strings.Repeat("d/", 2100)
	for _, p := range []string{"../secret", "/etc/passwd", "out/secret", "a\u0000b", long} {
		pj, _ := json.Marshal(p)
		for _, endpoint := range []string{protocol.WorkspaceReadFileEndpoint, protocol.WorkspaceStatEndpoint, protocol.WorkspaceListDirEndpoint, protocol.WorkspaceReaddirEndpoint} {
			resp := workspaceCall(t, b, endpoint, `{"path":`+string(pj)+`}`)
			wantFailure(t, resp, protocol.CodeInvalidPath)
			if strings.Contains(resp.Message, "secret\n") {
				t.Fatalf("%s %q: the refusal shows the file: %q", endpoint, p, resp.Message)
			}
		}
		resp := workspaceCall(t, b, protocol.WorkspaceWriteFileEndpoint, `{"path":`+string(pj)+`,"content":"x"}`)
		wantFailure(t, resp, protocol.CodeInvalidPath)
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "secret")); string(data) != "secret\n" {
		t.Fatalf("the file outside changed: %q", data)
	}
}

func TestReadOnlyRefusesWritesAndExecution(t *testing.T) {
	root := gitRoot(t)
	b := startBridge(t, bridge.Config{Root: root, ReadOnly: true, SandboxDir: t.TempDir()}, nil)
	for endpoint, payload := range map[string]string{
		protocol.WorkspaceWriteFileEndpoint:              `{"path":"x","content":"y"}`,
		protocol.WorkspaceStrReplaceEndpoint:             `{"path":"main.go","old":"42","new":"43"}`,
		protocol.WorkspaceMkdirEndpoint:                  `{"path":"d"}`,
		protocol.WorkspaceRmEndpoint:                     `{"path":"main.go"}`,
		protocol.TerminalExecuteEndpoint:                 `{"command":"touch pwned"}`,
		protocol.DebugStartEndpoint:                      `{"language":"python","program":"x.py"}`,
		protocol.SandboxListEndpoint:                     `{}`,
		protocol.TerminalSessionsEndpoint + "/s1/signal": `{"signal":"KILL"}`,
	} {
		resp := workspaceCall(t, b, endpoint, payload)
		wantFailure(t, resp, protocol.CodeForbidden)
		if !strings.Contains(resp.Message, "--read-only") {
			t.Errorf("%s: message %q does not name --read-only", endpoint, resp.Message)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pwned")); !os.IsNotExist(err) {
		t.Fatal("a read-only bridge ran a command")
	}
	if data, _ := os.ReadFile(filepath.Join(root, "main.go")); !strings.Contains(string(data), "Answer = 42") {
		t.Fatal("a read-only bridge changed a file")
	}
	read := workspaceOK[sandbox.ReadFileResult](t, b, protocol.WorkspaceReadFileEndpoint, `{"path":"main.go"}`)
	if !strings.Contains(read.Content, "Answer = 42") {
		t.Fatalf("read-file on a read-only bridge: %+v", read)
	}
	workspaceOK[sandbox.GitDiff](t, b, protocol.WorkspaceGitDiffEndpoint, `{}`)
	caps := workspaceOK[protocol.CapabilitiesResult](t, b, protocol.WorkspaceCapabilitiesEndpoint, ``)
	if !caps.ReadOnly || strings.Join(caps.Groups, ",") != "debug,files,git" || caps.Root != root {
		t.Fatalf("capabilities: %+v", caps)
	}
	if slices.Contains(caps.Routes, protocol.WorkspaceWriteFileEndpoint) || slices.Contains(caps.Routes, protocol.TerminalExecuteEndpoint) ||
		!slices.Contains(caps.Routes, protocol.WorkspaceReadFileEndpoint) {
		t.Fatalf("capabilities routes: %v", caps.Routes)
	}
}

func TestDisabledGroupsAnswerForbiddenNamingTheFlag(t *testing.T) {
	root := gitRoot(t)
	b := startBridge(t, bridge.Config{Root: root, Disable: []string{"git", "terminal", "git"}}, nil)
	for _, c := range []struct{ endpoint, payload, flag string }{
		{protocol.WorkspaceGitDiffEndpoint, `{}`, "--disable git"},
		{protocol.WorkspaceGitStatusEndpoint, `{"bogus":1}`, "--disable git"}, // refused before decoding
		{protocol.TerminalExecuteEndpoint, `{"command":"true"}`, "--disable terminal"},
	} {
		resp := workspaceCall(t, b, c.endpoint, c.payload)
		wantFailure(t, resp, protocol.CodeForbidden)
		if !strings.Contains(resp.Message, c.flag) {
			t.Errorf("%s: message %q does not name %s", c.endpoint, resp.Message, c.flag)
		}
	}
	workspaceOK[sandbox.ReadFileResult](t, b, protocol.WorkspaceReadFileEndpoint, `{"path":"main.go"}`)
	caps := workspaceOK[protocol.CapabilitiesResult](t, b, protocol.WorkspaceCapabilitiesEndpoint, `{}`)
	if caps.ReadOnly || strings.Join(caps.Disabled, ",") != "git,terminal" || strings.Join(caps.Groups, ",") != "debug,files" {
		t.Fatalf("capabilities: %+v", caps)
	}
	if _, err := bridge.New(bridge.Config{Root: root, Disable: []string{"files", "shell"}}); err == nil || !strings.Contains(err.Error(), "shell") {
		t.Fatalf("New with an unknown group: %v, want an error naming it", err)
	}
}

func TestAttachIsRefusedWhenTheTerminalIs(t *testing.T) {
	for _, cfg := range []bridge.Config{{ReadOnly: true}, {Disable: []string{bridge.GroupTerminal}}} {
		base, client := httpBridge(t, cfg, nil)
		res, err := client.Get(base + bridge.AttachPath)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Fatalf("attach on %+v: HTTP %d, want 403", cfg, res.StatusCode)
		}
	}
}

func TestSandboxRoutesDecodeStrictlyAndGainReaddir(t *testing.T) {
	b := startBridge(t, bridge.Config{SandboxDir: t.TempDir()}, nil)
	resp := workspaceCall(t, b, protocol.SandboxListEndpoint, `{"user":"u"}`)
	wantFailure(t, resp, protocol.CodeInvalidPayload)
	if !strings.Contains(resp.Message, `"user"`) {
		t.Fatalf("message %q does not name the field", resp.Message)
	}
	if !slices.Contains(b.Router().Routes(), protocol.SandboxWorkspacesEndpoint+"/:workspace_id/readdir") {
		t.Fatal("the sandbox readdir route is not mounted")
	}
	wantFailure(t, workspaceCall(t, b, protocol.SandboxWorkspacesEndpoint+"/ws-none/readdir", `{"path":"."}`), protocol.CodeWorkspaceNotFound)
}

// FuzzWorkspacePayload sends arbitrary payloads to the workspace routes:
// every call gets exactly one answer, a success or a coded refusal, never
// internal_error, and nothing outside the root is read.
func FuzzWorkspacePayload(f *testing.F) {
	outside := f.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("TOPSECRET"), 0o644); err != nil {
		f.Fatal(err)
	}
	root := f.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "out")); err != nil {
		f.Fatal(err)
	}
	b := startBridge(f, bridge.Config{Root: root, ReadOnly: true}, nil)
	endpoints := []string{protocol.WorkspaceReadFileEndpoint, protocol.WorkspaceStatEndpoint, protocol.WorkspaceListDirEndpoint,
		protocol.WorkspaceSearchEndpoint, protocol.WorkspaceReaddirEndpoint, protocol.WorkspaceWriteFileEndpoint}
	for _, seed := range []string{
		`{"path":"f.txt","line_numbers":true}`, `{"path":"out/secret"}`, `{"path":"../secret"}`, `{"path":"f.txt","start_line":2,"end_line":1}`,
		`{"pattern":"TOP","path":"out"}`, `{"path":"a\u0000b"}`, `{}`, `null`, `{"path":"f.txt","x":1}`, `{"path":"f.txt"}{}`, ``,
	} {
		for i := range endpoints {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, payload string) {
		endpoint := endpoints[int(which)%len(endpoints)]
		resp := b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "fuzz", Endpoint: endpoint, Payload: json.RawMessage(payload), Timeout: 10})
		if resp.CorrelationID != "fuzz" {
			t.Fatalf("answer for %q, want fuzz", resp.CorrelationID)
		}
		if resp.Success {
			if strings.Contains(string(resp.Result), "TOPSECRET") {
				t.Fatalf("%s %q read outside the root: %s", endpoint, payload, resp.Result)
			}
			return
		}
		switch resp.Error {
		case protocol.CodeInvalidPayload, protocol.CodeInvalidPath, protocol.CodeForbidden:
		default:
			t.Fatalf("%s %q: %s: %s", endpoint, payload, resp.Error, resp.Message)
		}
		if resp.Message == "" {
			t.Fatalf("%s %q: %s without a message", endpoint, payload, resp.Error)
		}
	})
}

// Capabilities list the sandbox's runtimes and whether each runs here,
// without opening the sandbox (no lock is taken on its directory): on this
// Linux machine with bubblewrap installed, both do; the container runtime,
// pointed at a socket no engine serves, does not, and says which socket; a
// bridge without the sandbox routes lists none.
func TestCapabilitiesListTheSandboxRuntimesThatRunHere(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(t.TempDir(), "no-engine.sock")
	b := startBridge(t, bridge.Config{SandboxDir: dir, SandboxContainer: bridge.SandboxContainerConfig{Host: "unix://" + sock}}, nil)
	caps := workspaceOK[protocol.CapabilitiesResult](t, b, protocol.WorkspaceCapabilitiesEndpoint, `{}`)
	want := []protocol.RuntimeStatus{{Name: "subprocess", Available: true}, {Name: "bwrap", Available: true}}
	if len(caps.SandboxRuntimes) != 3 || !slices.Equal(caps.SandboxRuntimes[:2], want) {
		t.Fatalf("sandbox runtimes: %+v, want %+v and container", caps.SandboxRuntimes, want)
	}
	if c := caps.SandboxRuntimes[2]; c.Name != "container" || c.Available || !strings.Contains(c.Reason, sock) {
		t.Fatalf("container runtime: %+v, want unavailable naming %s", c, sock)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("capabilities opened the sandbox: %v in its directory", entries)
	}
	b2 := startBridge(t, bridge.Config{}, nil)
	if caps := workspaceOK[protocol.CapabilitiesResult](t, b2, protocol.WorkspaceCapabilitiesEndpoint, `{}`); caps.SandboxRuntimes != nil {
		t.Fatalf("sandbox runtimes without the sandbox routes: %+v", caps.SandboxRuntimes)
	}
}
