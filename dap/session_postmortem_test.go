//go:build !windows

package dap_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// crashWorkspace builds testdata/crash.c with -g into a temp root.
func crashWorkspace(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("testdata/crash.c")
	if err != nil {
		t.Fatal(err)
	}
	root := writeFiles(t, map[string]string{"crash.c": string(src)})
	run(t, root, nil, "gcc", "-g", "-O0", "-o", "crash", "crash.c")
	return root
}

func run(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
}

func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (the Makefile's APT_PACKAGES has it)", name)
		}
		t.Skipf("%s is not installed", name)
	}
}

// gcoreOfRunning starts crash spin, waits for its "ready", dumps it with
// gcore (Debian's gdb) and kills it; it returns the core's path.
func gcoreOfRunning(t *testing.T, root string) string {
	t.Helper()
	needTool(t, "gcore")
	cmd := exec.Command(filepath.Join(root, "crash"), "spin")
	cmd.Dir = root
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("crash spin said %q, %v", line, err)
	}
	run(t, root, nil, "gcore", "-o", filepath.Join(root, "core.spin"), strconv.Itoa(cmd.Process.Pid))
	return filepath.Join(root, "core.spin."+strconv.Itoa(cmd.Process.Pid))
}

// kernelCore runs name (in root, with env) under ulimit -c unlimited,
// expects it to die of a signal and returns the core the kernel dumped.
// The global kernel.core_pattern is left alone: when it is not a plain
// file name (it is "core" on Debian), or core dumps cannot be enabled,
// the program is run under gdb instead, which dumps it with gcore at the
// crash.
func kernelCore(t *testing.T, root string, env []string, name string) string {
	t.Helper()
	pattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	p := strings.TrimSpace(string(pattern))
	if p == "" || strings.ContainsAny(p, "|/%") {
		t.Logf("core_pattern %q is not a plain file name: dumping under gdb", p)
		return gdbCore(t, root, env, name)
	}
	cmd := exec.Command("sh", "-c", "ulimit -c unlimited || exit 97; exec ./"+name)
	cmd.Dir, cmd.Env = root, env
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 97 {
		t.Logf("core dumps cannot be enabled here: dumping under gdb")
		return gdbCore(t, root, env, name)
	}
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).CoreDump() {
		t.Fatalf("%s: %v, want a crash with a core dump", name, err)
	}
	matches, _ := filepath.Glob(filepath.Join(root, p+"*"))
	if len(matches) != 1 {
		t.Fatalf("cores in %s: %q, want one named %s*", root, matches, p)
	}
	return matches[0]
}

// gdbCore runs name under gdb to its crash and dumps it there with gcore.
func gdbCore(t *testing.T, root string, env []string, name string) string {
	t.Helper()
	needTool(t, "gdb")
	core := filepath.Join(root, "core.gdb")
	run(t, root, env, "gdb", "-batch", "-nx", "-ex", "run", "-ex", "gcore "+core, "./"+name)
	return core
}

// openCore starts a post-mortem session and checks it answers stopped
// within the start's bound.
func openCore(t *testing.T, m *dap.Manager, req dap.StartRequest) (*dap.Session, *dap.Snapshot) {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	began := time.Now()
	start, err := m.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if start.State != dap.StateStopped || start.Stop == nil {
		t.Fatalf("start = %+v, want stopped at the crash", start)
	}
	t.Logf("%s opened the core stopped (%+v) in %v", start.Adapter, *start.Stop, time.Since(began).Round(time.Millisecond))
	s, err := m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{MaxFrames: 30})
	if err != nil {
		t.Fatal(err)
	}
	return s, snap
}

func frameNames(snap *dap.Snapshot) []string {
	var names []string
	for _, f := range snap.Frames {
		names = append(names, f.Name)
	}
	return names
}

func TestCoreOfRunningCProgramOpensStoppedInItsFunction(t *testing.T) {
	root := crashWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	core := gcoreOfRunning(t, root)
	s, snap := openCore(t, m, dap.StartRequest{Language: "c", Program: "crash", CoreFile: core})
	if !strings.HasPrefix(snap.Frames[0].Name, "spin") || snap.Frames[0].Line < 12 || snap.Frames[0].Line > 14 {
		t.Fatalf("top frame %+v (stack %q), want spin in its loop", snap.Frames[0], frameNames(snap))
	}
	if got := local(t, snap.Locals, "n"); got != "3" {
		t.Errorf("n = %s, want 3", got)
	}
	ctx := ctxFor(t, 20*time.Second)
	for _, cmd := range []string{dap.CmdStepOver, dap.CmdContinue} {
		if _, err := s.Control(ctx, cmd, dap.ControlRequest{}); code(err) != protocol.CodeUnsupported || !strings.Contains(err.Error(), "post-mortem") {
			t.Errorf("%s on a core: %v, want unsupported saying post-mortem", cmd, err)
		}
	}
	if _, err := m.Restart(ctx, dap.RestartRequest{SessionID: s.ID()}); code(err) != protocol.CodeUnsupported {
		t.Errorf("restart of a core: %v, want unsupported", err)
	}
}

func TestCoreOfCrashedCProgramOpensAtTheCrash(t *testing.T) {
	root := crashWorkspace(t)
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	core := kernelCore(t, root, nil, "crash")
	_, snap := openCore(t, m, dap.StartRequest{Language: "c", Program: "crash", CoreFile: core})
	if !strings.HasPrefix(snap.Frames[0].Name, "crash") || snap.Frames[0].Line != 20 {
		t.Fatalf("top frame %+v (stack %q), want crash at line 20", snap.Frames[0], frameNames(snap))
	}
	if snap.Stop.Signal != "SIGSEGV" {
		t.Errorf("stop %+v, want signal SIGSEGV", snap.Stop)
	}
	if got := local(t, snap.Locals, "depth"); got != "7" {
		t.Errorf("depth = %s, want 7", got)
	}
}

func TestCoreOfCrashedGoProgramOpensAtThePanic(t *testing.T) {
	src, err := os.ReadFile("testdata/gocrash.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	root := writeFiles(t, map[string]string{"main.go": string(src), "go.mod": "module gocrash\n\ngo 1.21\n"})
	m := newManager(t, root)
	needAdapter(t, m, "delve")
	run(t, root, nil, "go", "build", "-gcflags=all=-N -l", "-o", "gocrash", ".")
	core := kernelCore(t, root, append(os.Environ(), "GOTRACEBACK=crash"), "gocrash")
	_, snap := openCore(t, m, dap.StartRequest{Language: "go", Program: "gocrash", CoreFile: core})
	at := -1
	for i, f := range snap.Frames {
		if f.Name == "main.explode" {
			at = i
			break
		}
	}
	if at < 0 || snap.Frames[at].Line != 7 {
		t.Fatalf("stack %q, want main.explode at line 7", frameNames(snap))
	}
	// The top frames are the runtime's abort; the locals are explode's.
	if snap.FrameIndex != at {
		t.Errorf("frame_index %d of %q, want %d (main.explode)", snap.FrameIndex, frameNames(snap), at)
	}
	if len(snap.Locals) == 0 || !strings.Contains(fmt.Sprint(snap.Locals), "7") {
		t.Errorf("locals %+v, want explode's n = 7", snap.Locals)
	}
	if snap.Stop.Signal != "SIGABRT" {
		t.Errorf("stop %+v, want signal SIGABRT", snap.Stop)
	}
}

func TestCoreFileBadInputAnswersAtOnce(t *testing.T) {
	root := crashWorkspace(t)
	run(t, root, nil, "gcc", "-g", "-O0", "-o", "other", "crash.c")
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	core := gcoreOfRunning(t, root)
	ctx := ctxFor(t, 20*time.Second)
	for _, tc := range []struct {
		name string
		req  dap.StartRequest
		code string
		says string
	}{
		{"missing core", dap.StartRequest{Language: "c", Program: "crash", CoreFile: "core.none"}, protocol.CodeInvalidPayload, "core_file"},
		{"not a core", dap.StartRequest{Language: "c", Program: "crash", CoreFile: "crash"}, protocol.CodeInvalidPayload, "core_file"},
		{"another program's core", dap.StartRequest{Language: "c", Program: "other", CoreFile: core}, protocol.CodeInvalidPayload, "does not match program"},
		{"an adapter without cores", dap.StartRequest{Language: "python", Program: "crash.c", CoreFile: core}, protocol.CodeUnsupported, "lldb-dap"},
	} {
		began := time.Now()
		_, err := m.Start(ctx, tc.req)
		if code(err) != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %s saying %q", tc.name, err, tc.code, tc.says)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("%s answered after %v, want at once", tc.name, d)
		}
	}
	if left := descendants(); len(left) > 0 {
		t.Fatalf("processes left after refused starts: %q", left)
	}
}
