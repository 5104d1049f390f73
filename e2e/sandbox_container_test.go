//go:build !windows

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// The container runtime end to end: a real broker, a real `tether bridge
// --container-host` on a podman service of the test's own, and the calls
// an agent makes (over HTTP, and over MCP with the TypeScript SDK).

// containerStatus asks the status route for workspace id through the
// broker, checks the payload has exactly the fields the route serves (a
// container workspace's "container" names at least its image, the
// bridge's default when it asked for none), and decodes it.
func containerStatus(t *testing.T, c *routeCaller, id string) sandbox.WorkspaceStatus {
	t.Helper()
	resp := c.call("/api/sandbox/workspaces/"+id, map[string]any{})
	if !resp.Success {
		t.Fatalf("status of %s: %s: %s", id, resp.Error, resp.Message)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(resp.Result, &fields); err != nil {
		t.Fatalf("status %s: %v", resp.Result, err)
	}
	want := []string{"workspace_id", "mode", "branch", "base_ref", "base_commit", "runtime", "network", "container", "runtime_state", "path", "pinned"}
	if string(fields["runtime_state"]) != `"missing"` {
		// The engine's word on a container it has: its id and state.
		want = append(want, "runtime_detail")
	}
	var got []string
	for k := range fields {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("status fields %v, want %v: %s", got, want, resp.Result)
	}
	var st sandbox.WorkspaceStatus
	dec := json.NewDecoder(bytes.NewReader(resp.Result))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("status %s: %v", resp.Result, err)
	}
	if st.WorkspaceID != id || st.Runtime != "container" {
		t.Fatalf("status of %s: %+v", id, st)
	}
	return st
}

func TestSandboxContainerRuntimeThroughBrokerAndBridge(t *testing.T) {
	eng := startPodman(t)
	b := startBroker(t)
	ws := "ws-sandbox-container"
	bridge := startBridge(t, b, ws, "--sandbox-dir", t.TempDir(), "--container-host", eng.Host, "--container-image", eng.Image)
	c := &routeCaller{t: t, b: b, ws: ws, tok: token(t, auth.RoleCaller, ws)}
	ctx := context.Background()

	var a sandbox.AcquireResult
	c.ok("/api/sandbox/workspaces", map[string]any{"repo": sandboxOrigin(t), "mode": "edit", "user_id": "u", "project_id": "p",
		"conversation_id": "conv-ctr", "runtime": "container"}, &a)
	// No options asked: the workspace records the bridge's image, which
	// serves it, and no limits.
	if a.Runtime != "container" || a.Network != sandbox.NetworkNone || a.Container == nil ||
		!reflect.DeepEqual(*a.Container, sandbox.ContainerOptions{Image: eng.Image}) {
		t.Fatalf("acquired %+v (container %+v), want container/none in the bridge's image %s", a, a.Container, eng.Image)
	}
	if cp := a.Capabilities; !cp.Isolated || !cp.Writable || cp.Network {
		t.Fatalf("capabilities %+v, want isolated, writable, no network", cp)
	}
	id := a.WorkspaceID
	at := func(route string) string { return "/api/sandbox/workspaces/" + id + "/" + route }
	// The acquire checked the engine and the image; the first command
	// makes the container.
	if st := containerStatus(t, c, id); st.RuntimeState != sandbox.RuntimeMissing || st.Path != a.Path || st.Mode != sandbox.ModeEdit ||
		st.Branch != "agent/edits-conv-ctr" || !reflect.DeepEqual(st.Container, a.Container) || st.BaseCommit != a.BaseCommit {
		t.Fatalf("status before a command: %+v, want missing", st)
	}

	type execResult struct {
		Success  bool
		Output   string
		ExitCode int `json:"exit_code"`
	}
	var ex execResult
	c.ok(at("exec"), map[string]any{"command": "echo made inside > inside.txt && pwd && id -u && id -g"}, &ex)
	owner, err := os.Stat(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	wst := owner.Sys().(*syscall.Stat_t)
	if want := fmt.Sprintf("/workspace\n%d\n%d\n", wst.Uid, wst.Gid); !ex.Success || ex.Output != want {
		t.Fatalf("exec %+v, want output %q", ex, want)
	}
	// Written inside, read on the host: the worktree's owner's file.
	made := filepath.Join(a.Path, "inside.txt")
	if data, err := os.ReadFile(made); err != nil || string(data) != "made inside\n" {
		t.Fatalf("inside.txt on the host: %q %v", data, err)
	}
	fi, _ := os.Stat(made)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != wst.Uid || st.Gid != wst.Gid {
		t.Fatalf("inside.txt belongs to %d:%d, the worktree to %d:%d", st.Uid, st.Gid, wst.Uid, wst.Gid)
	}

	running := containerStatus(t, c, id)
	name := containerOf(t, eng, id)
	if running.RuntimeState != sandbox.RuntimeRunning || running.RuntimeDetail == "" || name == "" {
		t.Fatalf("status after a command: %+v, container %q; want running", running, name)
	}

	// The container killed from outside while a command runs in it: the
	// command is answered runtime_stopped at once, with the exit status.
	body, _ := json.Marshal(map[string]any{"endpoint": at("exec"), "payload": map[string]any{"command": "echo about to sleep; sleep 300"}, "timeout": 60})
	pending := b.goCall(ws, c.tok, string(body))
	testwait.Until(t, 20*time.Second, func() bool {
		out, _ := eng.Podman(ctx, "exec", name, "ps")
		return strings.Contains(out, "sleep 300")
	}, "the sleep to run in %s", name)
	if _, err := eng.Podman(ctx, "kill", name); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	r := await(t, pending, 10*time.Second)
	if r.status != 200 || r.resp.Success || r.resp.Error != protocol.CodeRuntimeStopped || !strings.Contains(r.resp.Message, "exit status 137") {
		t.Fatalf("the command in the killed container: HTTP %d %+v, want runtime_stopped with the exit status", r.status, r.resp)
	}
	t.Logf("answered %s after the kill: %s", time.Since(killed).Round(time.Millisecond), r.resp.Message)
	if st := containerStatus(t, c, id); st.RuntimeState != sandbox.RuntimeStopped || !strings.Contains(st.RuntimeDetail, "137") {
		t.Fatalf("status after the kill: %+v, want stopped with the exit status", st)
	}

	// The next command gets a fresh container, and its files.
	c.ok(at("exec"), map[string]any{"command": "cat inside.txt"}, &ex)
	if !ex.Success || ex.Output != "made inside\n" {
		t.Fatalf("the command after the kill: %+v", ex)
	}
	again := containerStatus(t, c, id)
	if again.RuntimeState != sandbox.RuntimeRunning || again.RuntimeDetail == running.RuntimeDetail {
		t.Fatalf("status after the next command: %+v, want running in another container than %q", again, running.RuntimeDetail)
	}

	// A release removes the container.
	c.ok(at("release"), map[string]any{}, nil)
	if st := containerStatus(t, c, id); st.RuntimeState != sandbox.RuntimeMissing {
		t.Fatalf("status after the release: %+v, want missing", st)
	}
	if left, err := eng.Containers(ctx); err != nil || len(left) != 0 {
		t.Fatalf("containers after the release: %v %v", left, err)
	}

	// So does the bridge's shutdown, of a container a command made again.
	c.ok(at("exec"), map[string]any{"command": "true"}, &ex)
	if containerOf(t, eng, id) == "" {
		t.Fatal("no container after the command that follows the release")
	}
	bridge.stop(syscall.SIGTERM, 10*time.Second)
	if left, err := eng.Containers(ctx); err != nil || len(left) != 0 {
		t.Fatalf("containers after the bridge's shutdown: %v %v", left, err)
	}
}

func TestMCPSandboxAcquireInAContainerRunsThereAndReleases(t *testing.T) {
	eng := startPodman(t)
	origin := sandboxOrigin(t)
	// No default image: the workspaces name theirs.
	w := startMCPWorkspace(t, nil, "--sandbox-dir", t.TempDir(), "--container-host", eng.Host)
	overMCP(t, w.b, w.ws, w.tok, func(t *testing.T, c *mcpClient) {
		key := "ctr-" + t.Name()[len(t.Name())-4:]
		var acq sandbox.AcquireResult
		text := c.ok("sandbox_acquire", map[string]any{"repo": origin, "mode": "edit", "key": key, "runtime": "container", "network": "none",
			"container": map[string]any{"image": eng.Image, "memory": "64m", "pids": 64, "env": map[string]string{"GREETING": "from-the-image"}}}, &acq)
		if acq.Runtime != "container" || acq.Network != sandbox.NetworkNone || acq.Container == nil || acq.Container.Image != eng.Image ||
			acq.Container.Memory != "64m" || !acq.Capabilities.Isolated || acq.Capabilities.Network {
			t.Fatalf("acquire %+v (container %+v)", acq, acq.Container)
		}
		if !strings.Contains(text, "runtime container, network none") || !strings.Contains(text, "Image "+eng.Image+"; the workspace is /workspace inside.") {
			t.Fatalf("acquire text %q", text)
		}
		id := acq.WorkspaceID
		// In the container: the worktree at /workspace (its host path is
		// not there), the runtime's keeper shell as PID 1, the options'
		// env.
		text = c.ok("terminal_run", map[string]any{"sandbox_id": id,
			"command": `pwd; test -e "` + acq.Path + `" || echo no-host-path; tr '\0' ' ' < /proc/1/cmdline; echo; echo "$GREETING"; echo hi > from-inside.txt`}, nil)
		for _, want := range []string{"/workspace\n", "no-host-path\n", "/bin/sh -c trap 'exit 0' TERM;", "from-the-image\n"} {
			if !strings.Contains(text, want) {
				t.Fatalf("terminal_run in the container: %q lacks %q", text, want)
			}
		}
		if got := c.ok("file_read", map[string]any{"sandbox_id": id, "path": "from-inside.txt"}, nil); !strings.Contains(got, "hi") {
			t.Fatalf("file_read of what the container wrote: %q", got)
		}
		// The engine runs it with the options: no network, 64 MiB without
		// swap past it, 64 processes.
		name := containerOf(t, eng, id)
		if name == "" {
			t.Fatal("no container on the engine after a command")
		}
		out, err := eng.Podman(context.Background(), "inspect", "--format", "{{.HostConfig.NetworkMode}} {{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} {{.HostConfig.PidsLimit}}", name)
		if err != nil || strings.TrimSpace(out) != fmt.Sprintf("none %d %d 64", 64<<20, 64<<20) {
			t.Fatalf("the container's settings: %q %v", out, err)
		}
		c.ok("sandbox_release", map[string]any{"sandbox_id": id}, nil)
		if n := containerOf(t, eng, id); n != "" {
			t.Fatalf("container %s left after sandbox_release", n)
		}
	})

	// Bad options are refused naming what is wrong, and leave nothing.
	c := connectMCP(t, mcpTransports(w.b, w.ws, w.tok)["http"]...)
	c.list()
	acquire := func(key string, opts map[string]any) mcpResult {
		return c.fails("sandbox_acquire", map[string]any{"repo": origin, "mode": "edit", "key": key, "runtime": "container", "container": opts}, protocol.CodeInvalidPayload)
	}
	if r := acquire("bad-memory", map[string]any{"image": eng.Image, "memory": "abc"}); !strings.Contains(r.Text, `container.memory "abc"`) {
		t.Errorf("memory abc: %q does not name the field", r.Text)
	}
	if r := acquire("bad-image", map[string]any{"image": "localhost/no-such-image:1"}); !strings.Contains(r.Text, `container.image "localhost/no-such-image:1"`) {
		t.Errorf("unknown image: %q does not name it", r.Text)
	}
	if r := acquire("no-image", nil); !strings.Contains(r.Text, "container.image is required") {
		t.Errorf("no image on a bridge without a default: %q", r.Text)
	}
	rc := &routeCaller{t: t, b: w.b, ws: w.ws, tok: w.tok}
	var list struct {
		Workspaces []struct {
			Key string `json:"conversation_id"`
		} `json:"workspaces"`
	}
	rc.ok("/api/sandbox/workspaces/list", map[string]any{}, &list)
	var keys []string
	for _, ws := range list.Workspaces {
		keys = append(keys, ws.Key)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"ctr-http", "ctr-tdio"}) {
		t.Errorf("workspaces of keys %v, want only the two released ones: a refused acquire leaves none", keys)
	}
}
