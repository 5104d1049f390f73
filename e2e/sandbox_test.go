package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/gittest"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// sandboxOrigin creates a bare repository with a main branch, served by
// path, as the "remote" of sandbox workspaces.
func sandboxOrigin(t *testing.T) string {
	t.Helper()
	src := gittest.Repo(t, map[string]string{"main.go": "package main\n\nconst Answer = 42\n"})
	origin := filepath.Join(t.TempDir(), "origin.git")
	gittest.Run(t, src, "clone", "-q", "--bare", src, origin)
	return origin
}

// routeCaller makes calls to one workspace's routes (sandbox, workspace
// files) through the broker.
type routeCaller struct {
	t   *testing.T
	b   *brokerProc
	ws  string
	tok string
}

func (c *routeCaller) call(endpoint string, payload any) protocol.ToolResponse {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"endpoint": endpoint, "payload": payload, "timeout": 60})
	r := c.b.call(c.ws, c.tok, string(body))
	if r.err != nil || r.status != 200 {
		c.t.Fatalf("%s: HTTP %d %v", endpoint, r.status, r.err)
	}
	return r.resp
}

// ok calls and decodes a successful result into out (may be nil).
func (c *routeCaller) ok(endpoint string, payload, out any) {
	c.t.Helper()
	resp := c.call(endpoint, payload)
	if !resp.Success {
		c.t.Fatalf("%s: %s: %s", endpoint, resp.Error, resp.Message)
	}
	if out != nil {
		if err := json.Unmarshal(resp.Result, out); err != nil {
			c.t.Fatalf("%s: decoding %s: %v", endpoint, resp.Result, err)
		}
	}
}

func (c *routeCaller) fails(endpoint string, payload any, code string) {
	c.t.Helper()
	if resp := c.call(endpoint, payload); resp.Success || resp.Error != code {
		c.t.Fatalf("%s %v: want %s, got %+v", endpoint, payload, code, resp)
	}
}

type acquired struct {
	WorkspaceID  string `json:"workspace_id"`
	Branch       string `json:"branch"`
	BaseRef      string `json:"base_ref"`
	Created      bool   `json:"created"`
	Capabilities struct {
		Writable, Isolated, Network bool
	} `json:"capabilities"`
}

func TestSandboxThroughBrokerAndBridge(t *testing.T) {
	const secretTok = "e2e-auth-token-never-shown"
	b := startBroker(t)
	sandboxDir := t.TempDir()
	ws := "ws-sandbox"
	bridge := startBridge(t, b, ws, "--sandbox-dir", sandboxDir)
	c := &routeCaller{t: t, b: b, ws: ws, tok: token(t, auth.RoleCaller, ws)}
	origin := sandboxOrigin(t)

	acq := map[string]any{"repo": origin, "mode": "edit", "user_id": "u", "project_id": "p", "conversation_id": "conv1", "auth_token": secretTok}
	var first, second acquired
	c.ok("/api/sandbox/workspaces", acq, &first)
	c.ok("/api/sandbox/workspaces", acq, &second)
	if !first.Created || second.Created || first.WorkspaceID != second.WorkspaceID || first.Branch != "agent/edits-conv1" || first.BaseRef != "main" {
		t.Fatalf("acquire twice: %+v / %+v", first, second)
	}
	if !first.Capabilities.Writable || first.Capabilities.Isolated || !first.Capabilities.Network {
		t.Fatalf("subprocess capabilities: %+v", first.Capabilities)
	}
	id := first.WorkspaceID
	at := func(route string) string { return "/api/sandbox/workspaces/" + id + "/" + route }

	c.ok(at("write-file"), map[string]any{"path": "docs/notes.md", "content": "hello from the agent\n"}, nil)
	c.ok(at("str-replace"), map[string]any{"path": "main.go", "old": "Answer = 42", "new": "Answer = 43"}, nil)
	c.fails(at("str-replace"), map[string]any{"path": "main.go", "old": "not there", "new": "x"}, protocol.CodeNoMatch)
	var found struct {
		Hits []struct {
			Path string
			Line int
			Text string
		}
	}
	c.ok(at("search"), map[string]any{"pattern": "Answer = 4[0-9]"}, &found)
	if len(found.Hits) != 1 || found.Hits[0].Path != "main.go" || found.Hits[0].Line != 3 {
		t.Fatalf("search: %+v", found)
	}
	var diff struct {
		Diff      string
		Untracked []string
	}
	c.ok(at("git/diff"), map[string]any{}, &diff)
	if !strings.Contains(diff.Diff, "+const Answer = 43") || len(diff.Untracked) != 1 {
		t.Fatalf("diff: %+v", diff)
	}
	var commit struct {
		Commit    string
		Committed bool
	}
	c.ok(at("git/commit"), map[string]any{"message": "agent change"}, &commit)
	c.ok(at("git/push"), map[string]any{"auth_token": secretTok}, nil)
	out, err := exec.Command("git", "--git-dir", origin, "log", "-1", "--format=%H", "agent/edits-conv1").Output()
	if err != nil || strings.TrimSpace(string(out)) != commit.Commit || !commit.Committed {
		t.Fatalf("origin has %q (%v), committed %+v", out, err, commit)
	}

	var ex struct {
		Success  bool
		Output   string
		ExitCode int `json:"exit_code"`
	}
	c.ok(at("exec"), map[string]any{"command": "cat docs/notes.md"}, &ex)
	if !ex.Success || ex.Output != "hello from the agent\n" {
		t.Fatalf("exec: %+v", ex)
	}

	for _, p := range []string{"../../etc/passwd", "/etc/passwd"} {
		c.fails(at("read-file"), map[string]any{"path": p}, protocol.CodeInvalidPath)
	}
	for _, ref := range []string{"--upload-pack=x", "a..b", "x\ny"} {
		bad := map[string]any{"repo": origin, "mode": "edit", "user_id": "u", "project_id": "p", "conversation_id": "conv2", "base_ref": ref}
		c.fails("/api/sandbox/workspaces", bad, protocol.CodeInvalidRef)
	}

	// An uncommitted edit survives a bridge restart.
	c.ok(at("write-file"), map[string]any{"path": "wip.txt", "content": "unsaved"}, nil)
	bridge.stop(syscall.SIGTERM, 10*time.Second)
	bridgeLog := strings.Join(bridge.lines, "\n")
	testwait.Until(t, 10*time.Second, func() bool { return !b.holds(ws) }, "%s no longer holding %s", b.name, ws)
	bridge = startBridge(t, b, ws, "--sandbox-dir", sandboxDir)
	var after acquired
	c.ok("/api/sandbox/workspaces", acq, &after)
	if after.Created || after.WorkspaceID != id {
		t.Fatalf("after restart: %+v", after)
	}
	var read struct{ Content string }
	c.ok(at("read-file"), map[string]any{"path": "wip.txt"}, &read)
	if read.Content != "unsaved" {
		t.Fatalf("after restart wip.txt holds %q", read.Content)
	}
	var list struct {
		Workspaces []struct{ ID string }
	}
	c.ok("/api/sandbox/workspaces/list", map[string]any{"user_id": "u"}, &list)
	if len(list.Workspaces) != 1 || list.Workspaces[0].ID != id {
		t.Fatalf("list: %+v", list)
	}
	c.ok("/api/sandbox/evict", map[string]any{"dry_run": true}, nil)
	c.ok(at("release"), nil, nil)
	c.ok(at("destroy"), nil, nil)
	c.fails(at("read-file"), map[string]any{"path": "wip.txt"}, protocol.CodeWorkspaceNotFound)

	bridge.stop(syscall.SIGTERM, 10*time.Second)
	bridgeLog += strings.Join(bridge.lines, "\n")
	if !strings.Contains(bridgeLog, "sandbox workspace created") {
		t.Fatal("the bridge log lacks the sandbox events; the token check below would prove nothing")
	}
	if strings.Contains(bridgeLog, secretTok) {
		t.Fatal("the auth token is in the bridge's log")
	}
	store, err := os.ReadFile(filepath.Join(sandboxDir, "store.json"))
	if err != nil || strings.Contains(string(store), secretTok) {
		t.Fatalf("store.json: %v / token present: %v", err, strings.Contains(string(store), secretTok))
	}
}

func TestSandboxIsolatedRuntimeThroughBridge(t *testing.T) {
	if err := exec.Command("bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "true").Run(); err != nil {
		t.Skipf("bwrap cannot run here (%v); runtime_unavailable is covered by the sandbox package tests", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := startBroker(t)
	ws := "ws-sandbox-iso"
	startBridge(t, b, ws, "--sandbox-dir", t.TempDir())
	c := &routeCaller{t: t, b: b, ws: ws, tok: token(t, auth.RoleCaller, ws)}
	var a acquired
	c.ok("/api/sandbox/workspaces", map[string]any{"repo": sandboxOrigin(t), "mode": "task", "user_id": "u", "project_id": "p", "task_id": "t1", "runtime": "bwrap", "network": "none"}, &a)
	if !a.Capabilities.Isolated || a.Capabilities.Network || a.Branch != "agent/task-t1" {
		t.Fatalf("acquire: %+v", a)
	}
	var ex struct {
		Success bool
		Output  string
	}
	cmd := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' && echo CONNECTED; touch /etc/escape 2>/dev/null && echo WROTE", ln.Addr().(*net.TCPAddr).Port)
	c.ok("/api/sandbox/workspaces/"+a.WorkspaceID+"/exec", map[string]any{"command": cmd}, &ex)
	if strings.Contains(ex.Output, "CONNECTED") || strings.Contains(ex.Output, "WROTE") {
		t.Fatalf("isolated runtime escaped: %+v", ex)
	}
}
