//go:build !windows

package container_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherdev/tether/internal/gittest"
	"github.com/tetherdev/tether/internal/podmantest"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/container"
)

// engine is the podman service every test of the package shares (one
// service and one image: starting them costs seconds).
var engine *podmantest.Engine

func TestMain(m *testing.M) {
	if err := podmantest.Available(); err != nil {
		// In CI, make deps installed podman: its absence is a failure.
		if os.Getenv("CI") != "" {
			fmt.Println("the container runtime tests cannot run:", err)
			os.Exit(1)
		}
		fmt.Println("skipping the container runtime tests:", err)
		os.Exit(0)
	}
	var err error
	engine, err = podmantest.Start()
	if err != nil {
		fmt.Println("starting podman:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// Every test removed what it made: no container is left.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		left, err := engine.Containers(ctx)
		cancel()
		if err != nil || len(left) > 0 {
			fmt.Printf("containers left behind: %v (%v)\n", left, err)
			code = 1
		}
	}
	engine.Close()
	if left := engine.Processes(); len(left) > 0 {
		fmt.Printf("podman processes left behind: %v\n", left)
		code = 1
	}
	if _, err := os.Stat(engine.Dir()); !os.IsNotExist(err) {
		fmt.Printf("the engine's directory %s (its socket) is left: %v\n", engine.Dir(), err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Println("goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is a sandbox Service whose container runtime uses engine.
type env struct {
	t    *testing.T
	svc  *sandbox.Service
	prov *container.Provider
	repo string
}

func newEnv(t *testing.T, tune func(p *container.Provider)) *env {
	t.Helper()
	return newEnvWith(t, tune, sandbox.EvictPolicy{})
}

func newEnvWith(t *testing.T, tune func(p *container.Provider), evict sandbox.EvictPolicy) *env {
	t.Helper()
	prov := &container.Provider{Host: engine.Host, Image: engine.Image, Idle: -1}
	if tune != nil {
		tune(prov)
	}
	svc, err := sandbox.New(sandbox.Config{Root: t.TempDir(), Evict: evict, Runtimes: []sandbox.RuntimeProvider{&sandbox.Subprocess{}, prov}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Error(err)
		}
		prov.Close()
	})
	src := gittest.Repo(t, map[string]string{"README.md": "# demo\n"})
	origin := filepath.Join(t.TempDir(), "origin.git")
	gittest.Run(t, src, "clone", "-q", "--bare", src, origin)
	return &env{t: t, svc: svc, prov: prov, repo: origin}
}

func (e *env) acquire(mode string, opts *sandbox.ContainerOptions) sandbox.AcquireResult {
	e.t.Helper()
	res, err := e.svc.AcquireWorkspace(context.Background(), e.request(mode, opts))
	if err != nil {
		e.t.Fatalf("acquire: %v", err)
	}
	return res
}

func (e *env) request(mode string, opts *sandbox.ContainerOptions) sandbox.AcquireRequest {
	req := sandbox.AcquireRequest{Repo: e.repo, Mode: mode, UserID: "u1", ProjectID: "p1", Runtime: "container", Container: opts}
	switch mode {
	case sandbox.ModeEdit:
		req.ConversationID = "c1"
	case sandbox.ModeTask:
		req.TaskID = "t1"
	}
	return req
}

func (e *env) exec(ctx context.Context, id, command string) sandbox.ExecResult {
	e.t.Helper()
	res, err := e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: command})
	if err != nil {
		e.t.Fatalf("exec %q: %v", command, err)
	}
	return res
}

// containerOf is the name of the workspace's container, as the engine
// lists it.
func (e *env) containerOf(id string) string {
	e.t.Helper()
	names, err := engine.Containers(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "-"+id) {
			return n
		}
	}
	return ""
}

// eventually waits for cond with the repository's one wait helper.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 20*time.Second, cond, "%s", what)
}

// wantCode fails unless err carries the protocol code.
func wantCode(t *testing.T, err error, code string) *protocol.Error {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
	return pe
}

func TestWriteInsideIsTheHostUsersAndCommits(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.acquire(sandbox.ModeEdit, nil)
	if ws.Runtime != "container" || ws.Network != sandbox.NetworkNone {
		t.Fatalf("acquired %s/%s, want container/none", ws.Runtime, ws.Network)
	}
	if c := ws.Capabilities; !c.Isolated || !c.Writable || c.Network {
		t.Fatalf("capabilities %+v, want isolated, writable, no network", c)
	}
	res := e.exec(context.Background(), ws.WorkspaceID, `echo made inside > inside.txt && pwd && id -u && id -g`)
	if !res.Success {
		t.Fatalf("exec: %+v", res)
	}
	fi, err := os.Stat(filepath.Join(ws.Path, "inside.txt"))
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := os.Stat(ws.Path)
	st, wst := fi.Sys().(*syscall.Stat_t), owner.Sys().(*syscall.Stat_t)
	if st.Uid != wst.Uid || st.Gid != wst.Gid {
		t.Fatalf("inside.txt belongs to %d:%d, the worktree to %d:%d", st.Uid, st.Gid, wst.Uid, wst.Gid)
	}
	want := fmt.Sprintf("/workspace\n%d\n%d\n", wst.Uid, wst.Gid)
	if res.Output != want {
		t.Fatalf("output %q, want %q", res.Output, want)
	}
	c, err := e.svc.GitCommit(context.Background(), ws.WorkspaceID, sandbox.CommitRequest{Message: "from the container"})
	if err != nil || !c.Committed {
		t.Fatalf("commit: %+v %v", c, err)
	}
	if got := gittest.Run(t, ws.Path, "show", "--name-only", "--format=%s", "HEAD"); !strings.Contains(got, "inside.txt") {
		t.Fatalf("the commit holds %q, want inside.txt", got)
	}
}

func TestUserOptionOwnsTheFilesWritten(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.acquire(sandbox.ModeTask, &sandbox.ContainerOptions{User: "1234:2345"})
	// The worktree is the host user's; the container's user needs leave
	// to write in it.
	if err := os.Chmod(ws.Path, 0o777); err != nil {
		t.Fatal(err)
	}
	if res := e.exec(context.Background(), ws.WorkspaceID, "touch by-user"); !res.Success {
		t.Fatalf("exec: %+v", res)
	}
	fi, err := os.Stat(filepath.Join(ws.Path, "by-user"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1234 || st.Gid != 2345 {
		t.Fatalf("by-user belongs to %d:%d, want 1234:2345", st.Uid, st.Gid)
	}
}

func TestAnalysisWorktreeIsReadOnlyInside(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.acquire(sandbox.ModeAnalysis, nil)
	if ws.Capabilities.Writable {
		t.Fatalf("an analysis container says writable: %+v", ws.Capabilities)
	}
	res := e.exec(context.Background(), ws.WorkspaceID, "cat README.md && touch x")
	if res.Success || !strings.Contains(res.Output, "# demo") || !strings.Contains(res.Output, "Read-only") {
		t.Fatalf("exec: %+v, want the README read and the write refused", res)
	}
}

// A workspace that names no image records the bridge's, so its acquire
// and its status say what runs it; a re-acquire without options keeps
// what the workspace has.
func TestWorkspaceWithoutAnImageRecordsTheBridges(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	ws := e.acquire(sandbox.ModeEdit, nil)
	if want := (sandbox.ContainerOptions{Image: engine.Image}); ws.Container == nil || !reflect.DeepEqual(*ws.Container, want) {
		t.Fatalf("acquired with container %+v, want %+v", ws.Container, want)
	}
	limited := e.acquire(sandbox.ModeEdit, &sandbox.ContainerOptions{Memory: "64m"})
	want := sandbox.ContainerOptions{Image: engine.Image, Memory: "64m"}
	if limited.Container == nil || !reflect.DeepEqual(*limited.Container, want) {
		t.Fatalf("re-acquired with container %+v, want %+v", limited.Container, want)
	}
	again := e.acquire(sandbox.ModeEdit, nil)
	st, err := e.svc.WorkspaceStatus(ctx, ws.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]*sandbox.ContainerOptions{"re-acquire without options": again.Container, "status": st.Container} {
		if got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: container %+v, want %+v", what, got, want)
		}
	}
}

func TestExecBasics(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.acquire(sandbox.ModeEdit, &sandbox.ContainerOptions{Env: map[string]string{"FROM_OPTS": "o"}})
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Join(ws.Path, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{
		Command: `pwd; read line; echo "got $line"; echo "$FROM_OPTS $FROM_REQ"; echo oops >&2; exit 3`,
		Cwd:     "sub", Stdin: "hello\n", Env: map[string]string{"FROM_REQ": "r"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "/workspace/sub\ngot hello\no r\noops\n"
	if res.Success || res.ExitCode != 3 || res.Output != want {
		t.Fatalf("exec: %+v, want exit 3 and output %q", res, want)
	}
	// Nothing of tether's environment reaches the container.
	t.Setenv("TETHER_SECRET_TEST", "s3cret")
	if res := e.exec(ctx, ws.WorkspaceID, "env"); strings.Contains(res.Output, "s3cret") {
		t.Fatalf("the host's environment leaked: %q", res.Output)
	}
	big := e.exec(ctx, ws.WorkspaceID, "yes | head -c 200000")
	if !big.Truncated || len(big.Output) != sandbox.DefaultOutputCap {
		t.Fatalf("output of %d bytes, truncated %v; want the cap", len(big.Output), big.Truncated)
	}
	// What a command leaves running in its group ends with it.
	if res := e.exec(ctx, ws.WorkspaceID, "sleep 123 & echo started"); !res.Success {
		t.Fatalf("exec: %+v", res)
	}
	if ps := e.exec(ctx, ws.WorkspaceID, "ps"); strings.Contains(ps.Output, "sleep 123") {
		t.Fatalf("a background process outlived its command:\n%s", ps.Output)
	}
}

func TestCancelKillsTheTreeAndTheContainerServesOn(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.acquire(sandbox.ModeEdit, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		res, _ := e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: "sleep 301 & sleep 302 & sh -c 'sleep 303'"})
		done <- res
	}()
	name := ""
	eventually(t, "the sleeps run", func() bool {
		if name == "" {
			name = e.containerOf(ws.WorkspaceID)
			if name == "" {
				return false
			}
		}
		out, _ := engine.Podman(context.Background(), "exec", name, "ps")
		return strings.Contains(out, "sleep 303")
	})
	cancelled := time.Now()
	cancel()
	var res sandbox.ExecResult
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled command was not answered within 10s")
	}
	if !res.TimedOut || res.ExitCode != -1 {
		t.Fatalf("cancelled exec: %+v", res)
	}
	t.Logf("answered %s after the cancel", time.Since(cancelled))
	ps := e.exec(context.Background(), ws.WorkspaceID, "ps")
	for _, s := range []string{"sleep 301", "sleep 302", "sleep 303"} {
		if strings.Contains(ps.Output, s) {
			t.Fatalf("%s survived the cancel:\n%s", s, ps.Output)
		}
	}
	// A timeout is the same kill.
	r, err := e.svc.Exec(context.Background(), ws.WorkspaceID, sandbox.ExecRequest{Command: "sleep 304 & sleep 305", Timeout: 0.5})
	if err != nil || !r.TimedOut {
		t.Fatalf("timed out exec: %+v %v", r, err)
	}
	if ps := e.exec(context.Background(), ws.WorkspaceID, "ps"); strings.Contains(ps.Output, "sleep 30") {
		t.Fatalf("a sleep survived the timeout:\n%s", ps.Output)
	}
}

func TestKilledContainerAnswersRuntimeStoppedAndTheNextCommandGetsAFreshOne(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.acquire(sandbox.ModeEdit, nil)
	ctx := context.Background()
	first := e.exec(ctx, ws.WorkspaceID, "echo first")
	if !first.Success {
		t.Fatalf("exec: %+v", first)
	}
	st, err := e.svc.WorkspaceStatus(ctx, ws.WorkspaceID)
	if err != nil || st.RuntimeState != sandbox.RuntimeRunning {
		t.Fatalf("status %+v %v, want running", st, err)
	}
	firstDetail := st.RuntimeDetail
	errc := make(chan error, 1)
	go func() {
		_, err := e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: "echo about to sleep; sleep 300"})
		errc <- err
	}()
	name := e.containerOf(ws.WorkspaceID)
	eventually(t, "the sleep runs", func() bool {
		out, _ := engine.Podman(ctx, "exec", name, "ps")
		return strings.Contains(out, "sleep 300")
	})
	if _, err := engine.Podman(ctx, "kill", name); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("the command in the killed container was not answered within 10s")
	}
	pe := wantCode(t, err, protocol.CodeRuntimeStopped)
	if !strings.Contains(pe.Message, "exit status 137") {
		t.Fatalf("message %q, want the exit status", pe.Message)
	}
	t.Logf("answered %s after the kill: %s", time.Since(killed), pe.Message)
	st, err = e.svc.WorkspaceStatus(ctx, ws.WorkspaceID)
	if err != nil || st.RuntimeState != sandbox.RuntimeStopped {
		t.Fatalf("status %+v %v, want stopped", st, err)
	}
	if res := e.exec(ctx, ws.WorkspaceID, "echo again"); !res.Success || res.Output != "again\n" {
		t.Fatalf("the next command: %+v", res)
	}
	st, err = e.svc.WorkspaceStatus(ctx, ws.WorkspaceID)
	if err != nil || st.RuntimeState != sandbox.RuntimeRunning || st.RuntimeDetail == firstDetail {
		t.Fatalf("status %+v %v, want running in another container than %q", st, err, firstDetail)
	}
}

func TestNetworkNoneCannotReachTheHostsLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	dial := fmt.Sprintf("echo hi | nc -w 3 127.0.0.1 %d", port)

	e := newEnv(t, func(p *container.Provider) { p.AllowHostNetwork = true })
	none := e.acquire(sandbox.ModeEdit, nil)
	if res := e.exec(context.Background(), none.WorkspaceID, dial); res.Success {
		t.Fatalf("network none connected: %+v", res)
	}
	if len(accepted) != 0 {
		t.Fatal("the host's listener accepted a connection from a network-none container")
	}
	// The same command on the host's network does connect: the refusal
	// above is the network's, not the command's.
	req := e.request(sandbox.ModeTask, nil)
	req.Network = sandbox.NetworkHost
	host, err := e.svc.AcquireWorkspace(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !host.Capabilities.Network {
		t.Fatalf("capabilities %+v, want network", host.Capabilities)
	}
	if res := e.exec(context.Background(), host.WorkspaceID, dial); !res.Success {
		t.Fatalf("network host did not connect: %+v", res)
	}
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the listener saw no connection from the host-network container")
	}
}

func TestMemoryLimitStopsAProgramAndSaysSo(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.acquire(sandbox.ModeEdit, &sandbox.ContainerOptions{Memory: "24m", Pids: 64, CPUs: 0.5})
	res := e.exec(context.Background(), ws.WorkspaceID, `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`)
	if res.Success || !res.OOMKilled || !strings.Contains(res.Error, "memory limit") {
		t.Fatalf("exec: %+v, want killed for memory", res)
	}
	if res := e.exec(context.Background(), ws.WorkspaceID, "echo still here"); !res.Success || res.OOMKilled {
		t.Fatalf("the next command: %+v", res)
	}
}

func TestReleaseDestroyAndEvictRemoveTheContainer(t *testing.T) {
	// Everything past its time at once: the first eviction stops the
	// runtime and removes the (clean) workspace.
	e := newEnvWith(t, nil, sandbox.EvictPolicy{RuntimeIdle: time.Nanosecond, EditTTL: time.Nanosecond, TaskTTL: time.Nanosecond})
	ctx := context.Background()
	ws := e.acquire(sandbox.ModeEdit, nil)
	e.exec(ctx, ws.WorkspaceID, "true")
	if e.containerOf(ws.WorkspaceID) == "" {
		t.Fatal("no container after a command")
	}
	if err := e.svc.Release(ctx, ws.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	if n := e.containerOf(ws.WorkspaceID); n != "" {
		t.Fatalf("container %s left after release", n)
	}
	if st, err := e.svc.WorkspaceStatus(ctx, ws.WorkspaceID); err != nil || st.RuntimeState != sandbox.RuntimeMissing {
		t.Fatalf("status %+v %v, want missing", st, err)
	}
	e.exec(ctx, ws.WorkspaceID, "true")
	if _, err := e.svc.Evict(ctx, sandbox.EvictRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := e.containerOf(ws.WorkspaceID); n != "" {
		t.Fatalf("container %s left after eviction", n)
	}
	e = newEnv(t, nil)
	task := e.acquire(sandbox.ModeTask, nil)
	e.exec(ctx, task.WorkspaceID, "true")
	if err := e.svc.Destroy(ctx, task.WorkspaceID); err != nil {
		t.Fatal(err)
	}
	if n := e.containerOf(task.WorkspaceID); n != "" {
		t.Fatalf("container %s left after destroy", n)
	}
}

func TestIdleContainerIsStoppedAndStartedAgain(t *testing.T) {
	e := newEnv(t, func(p *container.Provider) { p.Idle = 200 * time.Millisecond })
	ctx := context.Background()
	ws := e.acquire(sandbox.ModeEdit, nil)
	e.exec(ctx, ws.WorkspaceID, "true")
	eventually(t, "the idle container stops", func() bool {
		st, err := e.svc.WorkspaceStatus(ctx, ws.WorkspaceID)
		return err == nil && st.RuntimeState == sandbox.RuntimeStopped
	})
	if res := e.exec(ctx, ws.WorkspaceID, "echo back"); !res.Success || res.Output != "back\n" {
		t.Fatalf("exec after idle: %+v", res)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	t.Run("no engine", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "none.sock")
		e := newEnv(t, func(p *container.Provider) { p.Host = "unix://" + sock })
		start := time.Now()
		_, err := e.svc.AcquireWorkspace(ctx, e.request(sandbox.ModeEdit, nil))
		pe := wantCode(t, err, protocol.CodeRuntimeUnavailable)
		if !strings.Contains(pe.Message, sock) || time.Since(start) > 5*time.Second {
			t.Fatalf("%q after %s, want the socket named at once", pe.Message, time.Since(start))
		}
		if st := sandbox.RuntimeStatuses([]sandbox.RuntimeProvider{e.prov}); st[0].Available || !strings.Contains(st[0].Reason, sock) {
			t.Fatalf("runtime status %+v", st)
		}
	})
	e := newEnv(t, nil)
	t.Run("missing image", func(t *testing.T) {
		before, _ := engine.Podman(ctx, "images", "-q")
		_, err := e.svc.AcquireWorkspace(ctx, e.request(sandbox.ModeEdit, &sandbox.ContainerOptions{Image: "localhost/no-such-image:1"}))
		pe := wantCode(t, err, protocol.CodeInvalidPayload)
		if !strings.Contains(pe.Message, "localhost/no-such-image:1") {
			t.Fatalf("%q does not name the image", pe.Message)
		}
		if after, _ := engine.Podman(ctx, "images", "-q"); after != before {
			t.Fatalf("images changed: %q -> %q", before, after)
		}
	})
	for _, tc := range []struct {
		name, field string
		opts        sandbox.ContainerOptions
		network     string
	}{
		{"cpus", "container.cpus", sandbox.ContainerOptions{CPUs: 1e6}, ""},
		{"negative cpus", "container.cpus", sandbox.ContainerOptions{CPUs: -1}, ""},
		{"memory", "container.memory", sandbox.ContainerOptions{Memory: "1k"}, ""},
		{"memory unit", "container.memory", sandbox.ContainerOptions{Memory: "12 parsecs"}, ""},
		{"pids", "container.pids", sandbox.ContainerOptions{Pids: 2}, ""},
		{"user", "container.user", sandbox.ContainerOptions{User: "root"}, ""},
		{"env", "container.env", sandbox.ContainerOptions{Env: map[string]string{"A=B": "x"}}, ""},
		{"host network", "network", sandbox.ContainerOptions{}, sandbox.NetworkHost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := e.request(sandbox.ModeEdit, &tc.opts)
			req.Network = tc.network
			_, err := e.svc.AcquireWorkspace(ctx, req)
			pe := wantCode(t, err, protocol.CodeInvalidPayload)
			if !strings.Contains(pe.Message, tc.field) {
				t.Fatalf("%q does not name %s", pe.Message, tc.field)
			}
		})
	}
	t.Run("options for another runtime", func(t *testing.T) {
		req := e.request(sandbox.ModeEdit, &sandbox.ContainerOptions{})
		req.Runtime = "subprocess"
		_, err := e.svc.AcquireWorkspace(ctx, req)
		wantCode(t, err, protocol.CodeInvalidPayload)
	})
	if list := e.svc.List(sandbox.ListRequest{}); len(list.Workspaces) != 0 {
		t.Fatalf("refused acquires left workspaces: %+v", list.Workspaces)
	}
}

// An engine that dies while a command runs: the command is answered, not
// left waiting, and says the engine is gone.
func TestEngineDyingMidCommandAnswersTheCommand(t *testing.T) {
	own, err := podmantest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		own.Close()
		if left := own.Processes(); len(left) > 0 {
			t.Errorf("processes of the killed engine left: %v", left)
		}
	}()
	e := newEnv(t, func(p *container.Provider) { p.Host, p.Image = own.Host, own.Image })
	ws := e.acquire(sandbox.ModeEdit, nil)
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		_, err := e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: "sleep 300"})
		errc <- err
	}()
	eventually(t, "the sleep runs", func() bool {
		out, _ := own.Podman(ctx, "ps", "--format", "{{.Names}}")
		if strings.TrimSpace(out) == "" {
			return false
		}
		ps, _ := own.Podman(ctx, "exec", strings.TrimSpace(out), "ps")
		return strings.Contains(ps, "sleep 300")
	})
	own.KillService()
	select {
	case err = <-errc:
	case <-time.After(15 * time.Second):
		t.Fatal("the command was not answered within 15s of the engine's death")
	}
	pe := wantCode(t, err, protocol.CodeRuntimeUnavailable)
	if !strings.Contains(pe.Message, own.Host) && !strings.Contains(pe.Message, strings.TrimPrefix(own.Host, "unix://")) {
		t.Fatalf("%q does not name the engine's socket", pe.Message)
	}
}

// A release while the engine hangs: the running command is answered at
// once with runtime_stopped, not left to its timeout (the container's
// removal waits for the engine).
func TestReleaseAnswersARunningCommandWhileTheEngineHangs(t *testing.T) {
	e := newEnv(t, nil)
	ws := e.acquire(sandbox.ModeEdit, nil)
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		_, err := e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: "sleep 300", Timeout: 120})
		errc <- err
	}()
	name := ""
	eventually(t, "the sleep runs", func() bool {
		if name == "" {
			name = e.containerOf(ws.WorkspaceID)
		}
		out, _ := engine.Podman(ctx, "exec", name, "ps")
		return strings.Contains(out, "sleep 300")
	})
	engine.PauseService()
	paused := true
	t.Cleanup(func() {
		if paused {
			engine.ResumeService()
		}
	})
	released := make(chan error, 1)
	go func() { released <- e.svc.Release(ctx, ws.WorkspaceID) }()
	select {
	case err := <-errc:
		wantCode(t, err, protocol.CodeRuntimeStopped)
	case <-time.After(10 * time.Second):
		t.Fatal("the command was not answered within 10s of the release")
	}
	engine.ResumeService()
	paused = false
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if n := e.containerOf(ws.WorkspaceID); n != "" {
		t.Fatalf("container %s left after release", n)
	}
}
