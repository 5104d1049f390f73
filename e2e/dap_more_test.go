package e2e_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// TestDebugGoRestartAndCoreOverRoutes: through the built binaries, a Go
// session restarted keeps its id and stops at its breakpoint again, and a
// core the kernel dumped of a Go panic (GOTRACEBACK=crash) opens stopped
// with main.explode on the stack and SIGABRT, refusing to continue.
func TestDebugGoRestartAndCoreOverRoutes(t *testing.T) {
	d := startDebugWorkspace(t, map[string]string{
		"go.mod": "module example.com/adder\n\ngo 1.22\n", "main.go": dbgMainGo,
		"crash/go.mod": "module gocrash\n\ngo 1.22\n", "crash/main.go": mustReadFile("../dap/testdata/gocrash.go.txt"),
	}, nil)
	var start dap.StartResult
	d.ok("/api/debug/start-session", map[string]any{"language": "go", "program": ".",
		"breakpoints": []map[string]any{{"path": "main.go", "breakpoints": []map[string]any{{"line": 6}}}}}, &start)
	var snap dap.Snapshot
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "wait_timeout_ms": 20000}, &snap)
	if snap.Frames[0].Line != 6 {
		t.Fatalf("first stop at %+v, want line 6", snap.Frames[0])
	}
	began := time.Now()
	var res dap.RestartResult
	d.ok("/api/debug/restart", map[string]any{"session_id": start.SessionID, "wait_timeout_ms": 20000}, &res)
	if res.SessionID != start.SessionID || res.Method != "relaunch" || res.State != dap.StateStopped || res.Location == nil || res.Location.Line != 6 {
		t.Fatalf("restart = %+v at %+v, want session %s stopped at line 6 again", res, res.Location, start.SessionID)
	}
	t.Logf("restart of a Go session stopped again in %v", time.Since(began).Round(time.Millisecond))
	d.fails("/api/debug/restart", map[string]any{"session_id": start.SessionID, "wait": true}, protocol.CodeInvalidPayload)
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)

	pattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	if p := strings.TrimSpace(string(pattern)); p != "core" {
		t.Skipf("kernel.core_pattern is %q, not core: this test does not change it", p)
	}
	dir := filepath.Join(d.root, "crash")
	build := exec.Command("go", "build", "-gcflags=all=-N -l", "-o", "gocrash", ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	crash := exec.Command("sh", "-c", "ulimit -c unlimited && exec ./gocrash")
	crash.Dir, crash.Env = dir, append(os.Environ(), "GOTRACEBACK=crash")
	var ee *exec.ExitError
	if err := crash.Run(); !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).CoreDump() {
		t.Fatalf("gocrash: %v, want a crash with a core dump", err)
	}
	cores, _ := filepath.Glob(filepath.Join(dir, "core*")) // core, or core.PID with core_uses_pid
	if len(cores) != 1 {
		t.Fatalf("cores %q, want one", cores)
	}
	d.ok("/api/debug/start-session", map[string]any{"language": "go", "program": "crash/gocrash", "core_file": cores[0]}, &start)
	if start.State != dap.StateStopped || start.Stop == nil || start.Stop.Signal != "SIGABRT" {
		t.Fatalf("start on the core = %+v, want stopped with SIGABRT", start)
	}
	d.ok("/api/debug/snapshot", map[string]any{"session_id": start.SessionID, "max_frames": 40}, &snap)
	found := false
	for _, f := range snap.Frames {
		found = found || (f.Name == "main.explode" && f.Line == 7)
	}
	if !found {
		t.Fatalf("stack %+v, want main.explode at line 7", snap.Frames)
	}
	d.fails("/api/debug/continue", map[string]any{"session_id": start.SessionID}, protocol.CodeUnsupported)
	d.fails("/api/debug/start-session", map[string]any{"language": "go", "program": "crash/gocrash", "core_file": "main.go"}, protocol.CodeInvalidPayload)
	d.ok("/api/debug/stop-session", map[string]any{"session_id": start.SessionID}, nil)
}
