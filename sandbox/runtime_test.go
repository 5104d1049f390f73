//go:build !windows

package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// requireBwrap skips when bubblewrap cannot create namespaces here; the
// runtime_unavailable answer is then tested by
// TestBwrapWhereItCannotRunIsUnavailable.
func requireBwrap(t *testing.T) {
	t.Helper()
	if err := (&sandbox.Bwrap{}).Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bwrap unavailable in CI: %v", err)
		}
		t.Skipf("bwrap cannot run here: %v", err)
	}
}

func TestBwrapNetworkNoneCannotConnectOrWriteOutside(t *testing.T) {
	requireBwrap(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	outside := t.TempDir()

	other := e.acquire(editReq(origin, "other")) // a neighbour it must not see
	req := editReq(origin, "iso")
	req.Runtime = "bwrap"
	ws := e.acquire(req)
	if want := (sandbox.Capabilities{Writable: true, Isolated: true, Network: false}); ws.Capabilities != want {
		t.Fatalf("capabilities %+v, want %+v", ws.Capabilities, want)
	}
	connect := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' && echo CONNECTED", port)
	res := must[sandbox.ExecResult](t)(e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: connect}))
	if res.Success || strings.Contains(res.Output, "CONNECTED") {
		t.Fatalf("network none reached 127.0.0.1: %+v", res)
	}
	script := strings.Join([]string{
		"echo in > inside.txt",
		"echo tmp > /tmp/private.txt",
		"echo out > " + filepath.Join(outside, "escaped.txt") + " 2>/dev/null && echo WROTE-OUTSIDE",
		"echo out > " + filepath.Join(e.root, "store.json") + " 2>/dev/null", // lands on a private tmpfs at most
		"cat " + filepath.Join(other.Path, "README.md") + " 2>/dev/null && echo SAW-NEIGHBOUR",
		"touch /etc/tether-escape 2>/dev/null && echo WROTE-ETC",
		"git status --porcelain >/dev/null 2>&1 && echo GIT-OK",
		"true",
	}, "\n")
	res = must[sandbox.ExecResult](t)(e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: script}))
	for _, bad := range []string{"WROTE-OUTSIDE", "SAW-NEIGHBOUR", "WROTE-ETC"} {
		if strings.Contains(res.Output, bad) {
			t.Errorf("isolated runtime: %s\n%s", bad, res.Output)
		}
	}
	if !strings.Contains(res.Output, "GIT-OK") {
		t.Errorf("git cannot read the worktree inside bwrap: %s", res.Output)
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped.txt")); !os.IsNotExist(err) {
		t.Error("a file appeared outside the worktree")
	}
	if data, _ := os.ReadFile(filepath.Join(e.root, "store.json")); !strings.Contains(string(data), ws.WorkspaceID) {
		t.Error("the store was overwritten from inside the sandbox")
	}
	if _, err := os.Stat("/tmp/private.txt"); err == nil {
		t.Error("/tmp is not private")
	}
	if data, err := os.ReadFile(filepath.Join(ws.Path, "inside.txt")); err != nil || string(data) != "in\n" {
		t.Fatalf("the worktree is not writable inside bwrap: %q %v", data, err)
	}

	// The same connection works with network host, so the check above is
	// not vacuous.
	req.Network = sandbox.NetworkHost
	ws2 := e.acquire(req)
	if !ws2.Capabilities.Network || ws2.Created {
		t.Fatalf("replacing the runtime: %+v", ws2)
	}
	res = must[sandbox.ExecResult](t)(e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: connect}))
	if !strings.Contains(res.Output, "CONNECTED") {
		t.Fatalf("network host could not connect: %+v", res)
	}
	if data, _ := os.ReadFile(filepath.Join(ws.Path, "inside.txt")); string(data) != "in\n" {
		t.Fatal("replacing the runtime touched the workspace")
	}
}

func TestBwrapWhereItCannotRunIsUnavailable(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, func(c *sandbox.Config) { c.BwrapBin = "/nonexistent/bwrap" })
	req := editReq(origin, "nobwrap")
	req.Runtime = "bwrap"
	_, err := e.svc.AcquireWorkspace(context.Background(), req)
	wantCode(t, err, protocol.CodeRuntimeUnavailable)
	if list := e.svc.List(sandbox.ListRequest{}); len(list.Workspaces) != 0 {
		t.Fatalf("a refused acquire left %+v", list.Workspaces)
	}
}

// On macOS (and anywhere but Linux) bwrap cannot exist: the answer is
// runtime_unavailable naming the platform and the runtime that does run.
func TestBwrapOffLinuxIsUnavailableSayingWhy(t *testing.T) {
	if err := sandbox.BwrapOn("linux"); err != nil {
		t.Fatalf("BwrapOn(linux) = %v, want nil (then probed)", err)
	}
	err := sandbox.BwrapOn("darwin")
	wantCode(t, err, protocol.CodeRuntimeUnavailable)
	for _, want := range []string{"Linux namespaces", "darwin", "subprocess"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("BwrapOn(darwin) = %q, want it to say %q", err, want)
		}
	}
}

func TestSubprocessCannotPromiseNoNetwork(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	req := editReq(origin, "nonet")
	req.Network = sandbox.NetworkNone
	_, err := e.svc.AcquireWorkspace(context.Background(), req)
	wantCode(t, err, protocol.CodeRuntimeUnavailable)
}

func TestReleaseStopsRuntimeKeepsWorkspace(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	ws := e.acquire(editReq(origin, "rel"))
	id := ws.WorkspaceID
	must[sandbox.WriteFileResult](t)(e.svc.WriteFile(ctx, id, sandbox.WriteFileRequest{Path: "build/out.o", Content: "obj"}))
	done := make(chan sandbox.ExecResult, 1)
	go func() {
		r, _ := e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "touch started && sleep 30"})
		done <- r
	}()
	// The command makes the file once it runs; nothing signals when.
	started := filepath.Join(ws.Path, "started")
	testwait.Until(t, 5*time.Second, func() bool {
		_, err := os.Stat(started)
		return err == nil
	}, "%s to appear", started)
	// A re-acquire does not wait for the running command.
	if again := e.acquire(editReq(origin, "rel")); again.WorkspaceID != id {
		t.Fatal("re-acquire changed the workspace")
	}
	if err := e.svc.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Success {
		t.Fatalf("the running command survived release: %+v", r)
	}
	got := must[sandbox.ReadFileResult](t)(e.svc.ReadFile(ctx, id, sandbox.ReadFileRequest{Path: "build/out.o"}))
	if got.Content != "obj" {
		t.Fatal("release touched the workspace")
	}
	if r := must[sandbox.ExecResult](t)(e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "echo again"})); r.Output != "again\n" {
		t.Fatalf("exec after release: %+v", r)
	}
}

// RuntimeStatuses asks each runtime that can tell whether it runs here,
// and passes a refusal's own words on.
func TestRuntimeStatusesSayWhyARuntimeCannotRun(t *testing.T) {
	got := sandbox.RuntimeStatuses([]sandbox.RuntimeProvider{&sandbox.Subprocess{}, &sandbox.Bwrap{Bin: "/nonexistent/bwrap"}})
	if len(got) != 2 || got[0] != (protocol.RuntimeStatus{Name: "subprocess", Available: true}) ||
		got[1].Name != "bwrap" || got[1].Available || !strings.Contains(got[1].Reason, "bwrap is not installed here") {
		t.Fatalf("statuses: %+v", got)
	}
}
