package e2e_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// Remote attach: the program runs from sources in another directory than
// the bridge's root (as it would in a container or on another machine),
// under a debug server that listens on a port; the session attaches with
// path mappings, sets its breakpoint on the bridge's copy of the file, and
// the stop reports the bridge's path.

// remoteDir writes files into a directory outside any bridge's root: the
// "remote" side's sources.
func remoteDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "remote-src")
	writeFiles(t, dir, files)
	return dir
}

// waitListening waits until the attach target listens on port, failing
// the test if it ended first.
func waitListening(t *testing.T, prog *dbgAttachTarget, port int, what string) {
	t.Helper()
	testwait.Until(t, 30*time.Second, func() bool {
		select {
		case <-prog.exited:
			t.Fatalf("%s exited: %v", what, prog.cmd.ProcessState)
		default:
		}
		return dbgListening(port)
	}, "%s listening on %d", what, port)
}

// checkMappedStop checks that a remote attach's breakpoint stopped in the
// bridge's copy of the file at line.
func checkMappedStop(t *testing.T, d *debugWorkspace, id, localPath string, line int, fn string) dap.Snapshot {
	t.Helper()
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": id, "wait_timeout_ms": 20000}, &snap)
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 {
		t.Fatalf("stop %+v at %+v, want a breakpoint", snap.Stop, snap.Frames)
	}
	top := snap.Frames[0]
	if top.Path != localPath || top.Line != line || !strings.HasSuffix(top.Name, fn) {
		t.Fatalf("top frame %+v, want %s at %s:%d (the bridge's path, not the remote one)", top, fn, localPath, line)
	}
	return snap
}

// TestDebugRemoteAttachDebugpyPathMappings attaches to `python -m debugpy
// --listen` running beat.py from another directory, with a path mapping
// from the bridge's app/ to it: the breakpoint set on app/beat.py binds and
// stops, reporting app/beat.py; stop-session detaches and the program runs
// on.
func TestDebugRemoteAttachDebugpyPathMappings(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import debugpy").Run(); err != nil {
		t.Skipf("/usr/bin/python3 cannot import debugpy: %v", err)
	}
	d := startDebugWorkspace(t, map[string]string{"app/beat.py": dbgBeatPy}, nil)
	remote := remoteDir(t, map[string]string{"beat.py": dbgBeatPy})
	port := freePort(t)
	prog := startAttachTarget(t, remote, exec.Command("/usr/bin/python3", "-m", "debugpy",
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--wait-for-client", "beat.py"),
		func(cmdline string) bool {
			return strings.Contains(cmdline, "debugpy/adapter --for-server") && strings.Contains(cmdline, fmt.Sprintf(" --port %d ", port))
		})
	// No probe connection: debugpy's adapter serves one client.
	waitListening(t, prog, port, "debugpy")

	local := filepath.Join(d.root, "app", "beat.py")
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "python", "request": "attach", "connect": map[string]any{"host": "localhost", "port": port},
		"path_mappings": []map[string]any{{"local_root": "app", "remote_root": remote}},
		"breakpoints":   []map[string]any{{"path": "app/beat.py", "breakpoints": []map[string]any{{"line": 5}}}},
	}, &start)
	if start.Adapter != "debugpy" || len(start.Breakpoints) != 1 || !start.Breakpoints[0].Verified {
		t.Fatalf("start = %+v, want debugpy with one verified breakpoint", start)
	}
	if p := start.Breakpoints[0].Path; p != "" && p != local {
		t.Errorf("breakpoint path %q, want the bridge's %q", p, local)
	}
	snap := checkMappedStop(t, d, start.SessionID, local, 5, "work")
	n, err := strconv.Atoi(dbgLocal(t, snap.Locals, "n"))
	if err != nil {
		t.Fatalf("local n: %v", err)
	}
	if got := dbgLocal(t, snap.Locals, "sq"); got != strconv.Itoa(n*n) {
		t.Errorf("sq = %s with n = %d", got, n)
	}
	// A step reports the bridge's path too.
	var stepped dap.ControlResult
	d.ok("/api/debug/step-over", map[string]any{"session_id": start.SessionID}, &stepped)
	if stepped.Location == nil || stepped.Location.Path != local {
		t.Errorf("step-over location %+v, want in %s", stepped.Location, local)
	}
	var stopped dap.StopResult
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, &stopped)
	if stopped.State != dap.StateEnded {
		t.Fatalf("stop-session = %+v", stopped)
	}
	prog.checkDetached()
}

// TestDebugRemoteAttachDelvePathMappings attaches to a headless delve
// (dlv exec --headless --accept-multiclient) running a Go program built in
// another directory, with a path mapping from the bridge's root to it: the
// breakpoint set on the bridge's beat.go binds and stops, reporting the
// bridge's path.
func TestDebugRemoteAttachDelvePathMappings(t *testing.T) {
	dlv, err := exec.LookPath("dlv")
	if err != nil {
		t.Skipf("no dlv on PATH: %v", err)
	}
	files := map[string]string{"go.mod": "module example.com/beat\n\ngo 1.22\n", "beat.go": dbgBeatGo}
	d := startDebugWorkspace(t, files, nil)
	remote := remoteDir(t, files)
	build := exec.Command("go", "build", "-gcflags=all=-N -l", "-o", "beatprog", ".")
	build.Dir = remote
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	port := freePort(t)
	prog := startAttachTarget(t, remote, exec.Command(dlv, "exec", "--headless", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--accept-multiclient", "--continue", "--api-version=2", "./beatprog"),
		// delve runs the program in a process group of its own.
		func(cmdline string) bool {
			return strings.HasPrefix(cmdline, "./beatprog") || strings.Contains(cmdline, "/beatprog")
		})
	waitListening(t, prog, port, "dlv")
	testwait.Until(t, 15*time.Second, func() bool { return prog.beatPast(-1) }, "the program's first beat")

	local := filepath.Join(d.root, "beat.go")
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "go", "request": "attach", "connect": map[string]any{"port": port},
		"path_mappings": []map[string]any{{"local_root": ".", "remote_root": remote}},
		"breakpoints":   []map[string]any{{"path": "beat.go", "breakpoints": []map[string]any{{"line_content": "return doubled"}}}},
	}, &start)
	if start.Adapter != "delve" || len(start.Breakpoints) != 1 || !start.Breakpoints[0].Verified || start.Breakpoints[0].Line != 11 {
		t.Fatalf("start = %+v, want delve with one verified breakpoint on line 11", start)
	}
	if p := start.Breakpoints[0].Path; p != "" && p != local {
		t.Errorf("breakpoint path %q, want the bridge's %q", p, local)
	}
	snap := checkMappedStop(t, d, start.SessionID, local, 11, "tick")
	n, err := strconv.Atoi(dbgLocal(t, snap.Locals, "n"))
	if err != nil {
		t.Fatalf("local n: %v", err)
	}
	if got := dbgLocal(t, snap.Locals, "doubled"); got != strconv.Itoa(2*n) {
		t.Errorf("doubled = %s with n = %d", got, n)
	}
	var stopped dap.StopResult
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, &stopped)
	if stopped.State != dap.StateEnded {
		t.Fatalf("stop-session = %+v", stopped)
	}
	// Detached: the headless server lets the program run on.
	for range 2 {
		n := prog.beat()
		testwait.Until(t, 10*time.Second, func() bool { return prog.beatPast(n) }, "the program's counter past %d", n)
	}
}

// TestDebugAttachBadTargetAnswersAtOnce: an attach to a port nobody
// listens on, to a host outside --debug-attach-allow, or with a bad path
// mapping is answered at once with an error naming the field, and starts
// nothing.
func TestDebugAttachBadTargetAnswersAtOnce(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"beat.py": dbgBeatPy}, nil)
	closed := freePort(t)
	attach := func(lang string, connect map[string]any, extra map[string]any) map[string]any {
		p := map[string]any{"language": lang, "request": "attach", "connect": connect}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	cases := []struct {
		name    string
		payload map[string]any
		code    string
		field   string
	}{
		{"debugpy, nobody listens", attach("python", map[string]any{"port": closed}, nil), protocol.CodeInvalidPayload, "connect"},
		{"delve, nobody listens", attach("go", map[string]any{"host": "127.0.0.1", "port": closed}, nil), protocol.CodeInvalidPayload, "connect"},
		{"host outside the allow list", attach("python", map[string]any{"host": "192.0.2.7", "port": 5678}, nil), protocol.CodeForbidden, "connect.host"},
		{"IPv6 outside the allow list", attach("go", map[string]any{"host": "2001:db8::1", "port": 5678}, nil), protocol.CodeForbidden, "connect.host"},
		{"bad port", attach("python", map[string]any{"port": 70000}, nil), protocol.CodeInvalidPayload, "connect.port"},
		{"config form outside the allow list", map[string]any{"config": map[string]any{"type": "go", "request": "attach", "mode": "remote", "host": "192.0.2.7", "port": 2345}},
			protocol.CodeForbidden, "config.host"},
		{"local_root outside the root", attach("python", map[string]any{"port": closed}, map[string]any{"path_mappings": []map[string]any{{"local_root": "/etc", "remote_root": "/srv"}}}),
			protocol.CodeInvalidPayload, "path_mappings[0].local_root"},
		{"relative remote_root", attach("python", map[string]any{"port": closed}, map[string]any{"path_mappings": []map[string]any{{"local_root": ".", "remote_root": "srv/app"}}}),
			protocol.CodeInvalidPayload, "path_mappings[0].remote_root"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			begun := time.Now()
			r := d.fails("/api/debug/start-session", c.payload, c.code)
			if took := time.Since(begun); took > 5*time.Second {
				t.Errorf("answered after %v, want at once (< 5s)", took)
			}
			if !strings.HasPrefix(r.resp.Message, c.field+":") && !strings.HasPrefix(r.resp.Message, c.field+" ") {
				t.Errorf("message %q does not name %s", r.resp.Message, c.field)
			}
		})
	}
	var list dap.SessionList
	d.ok("/api/debug/list-sessions", map[string]any{}, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("sessions after refused attaches: %+v", list.Sessions)
	}
}

// TestDebugAttachAllowFlagNarrowsTargets: a bridge started with
// TETHER_DEBUG_ATTACH_ALLOW (the --debug-attach-allow default) refuses
// loopback when it is not listed.
func TestDebugAttachAllowFlagNarrowsTargets(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{"beat.py": dbgBeatPy}, append(os.Environ(), "TETHER_DEBUG_ATTACH_ALLOW=192.0.2.0/24"))
	r := d.fails("/api/debug/start-session", map[string]any{"language": "python", "request": "attach",
		"connect": map[string]any{"host": "127.0.0.1", "port": freePort(t)}}, protocol.CodeForbidden)
	if !strings.HasPrefix(r.resp.Message, "connect.host:") || !strings.Contains(r.resp.Message, "192.0.2.0/24") {
		t.Errorf("message %q, want it to name connect.host and the allow list", r.resp.Message)
	}
}

// TestDebugRemoteAttachNodePathMappings attaches to `node --inspect`
// running beat.js from another directory, with a path mapping from the
// bridge's src/: the breakpoint set on src/beat.js stops, reporting the
// bridge's path, and stop-session detaches leaving the program running.
func TestDebugRemoteAttachNodePathMappings(t *testing.T) {
	node := nodeOrSkip(t)
	d := startDebugWorkspace(t, map[string]string{"src/beat.js": nodeBeatJS}, nil)
	remote := remoteDir(t, map[string]string{"beat.js": nodeBeatJS})
	cmd := exec.Command(node, "--inspect=127.0.0.1:0", "beat.js")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	prog := startAttachTarget(t, remote, cmd, nil)
	port := nodeInspectPort(t, bufio.NewReader(stderr))
	testwait.Until(t, 10*time.Second, func() bool { return prog.beatPast(-1) }, "the program's first beat")

	local := filepath.Join(d.root, "src", "beat.js")
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "javascript", "request": "attach", "connect": map[string]any{"port": port},
		"path_mappings": []map[string]any{{"local_root": "src", "remote_root": remote}},
		"breakpoints":   []map[string]any{{"path": "src/beat.js", "breakpoints": []map[string]any{{"line": 4}}}},
	}, &start)
	if start.Adapter != "node" || len(start.Breakpoints) != 1 || !start.Breakpoints[0].Verified {
		t.Fatalf("start = %+v, want node with one verified breakpoint", start)
	}
	checkMappedStop(t, d, start.SessionID, local, 4, "work")
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
	prog.checkDetached()
}

// dbgBeatC: line 5 is `return doubled;` in tick, called forever; the
// counter goes to the file "beat".
const dbgBeatC = `#include <stdio.h>
#include <unistd.h>
int tick(int n) {
    int doubled = n * 2;
    return doubled;
}
int main(void) {
    for (int i = 0; ; i++) {
        tick(i);
        FILE *f = fopen("beat", "w");
        if (f) { fprintf(f, "%d", i); fclose(f); }
        usleep(50000);
    }
}
`

// TestDebugRemoteAttachLLDBServerPathMappings attaches lldb-dap to an
// lldb-server gdbserver running a C program built in another directory,
// with a path mapping from the bridge's root: the breakpoint set on the
// bridge's beat.c stops, reporting the bridge's path, and stop-session
// detaches leaving the program running.
func TestDebugRemoteAttachLLDBServerPathMappings(t *testing.T) {
	var server string
	for _, name := range []string{"lldb-server", "lldb-server-19", "lldb-server-18", "lldb-server-17"} {
		if p, err := exec.LookPath(name); err == nil {
			server = p
			break
		}
	}
	if server == "" {
		t.Skip("no lldb-server on PATH")
	}
	d := startDebugWorkspace(t, map[string]string{"beat.c": dbgBeatC}, nil)
	remote := remoteDir(t, map[string]string{"beat.c": dbgBeatC})
	build := exec.Command("gcc", "-g", "-O0", "-o", "beatprog", "beat.c")
	build.Dir = remote
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	port := freePort(t)
	prog := startAttachTarget(t, remote, exec.Command(server, "gdbserver", fmt.Sprintf("127.0.0.1:%d", port), "--", "./beatprog"),
		func(cmdline string) bool {
			return strings.HasPrefix(cmdline, "./beatprog") || strings.Contains(cmdline, "/beatprog")
		})
	waitListening(t, prog, port, "lldb-server")

	local := filepath.Join(d.root, "beat.c")
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{
		"language": "c", "request": "attach", "connect": map[string]any{"port": port},
		"path_mappings": []map[string]any{{"local_root": ".", "remote_root": remote}},
		"breakpoints":   []map[string]any{{"path": "beat.c", "breakpoints": []map[string]any{{"line_content": "return doubled;"}}}},
	}, &start)
	if start.Adapter != "lldb-dap" || len(start.Breakpoints) != 1 || start.Breakpoints[0].Line != 5 {
		t.Fatalf("start = %+v, want lldb-dap with one breakpoint on line 5", start)
	}
	snap := checkMappedStop(t, d, start.SessionID, local, 5, "tick")
	n, err := strconv.Atoi(dbgLocal(t, snap.Locals, "n"))
	if err != nil {
		t.Fatalf("local n: %v", err)
	}
	if got := dbgLocal(t, snap.Locals, "doubled"); got != strconv.Itoa(2*n) {
		t.Errorf("doubled = %s with n = %d", got, n)
	}
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
	// gdbserver ends once its client detached; the program runs on.
	for range 2 {
		n := prog.beat()
		testwait.Until(t, 10*time.Second, func() bool { return prog.beat() > n }, "the program's counter past %d", n)
	}
}
