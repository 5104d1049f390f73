//go:build !windows

package dap_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/testwait"
)

// pyWarmProbe says what a program can see of how it was started, and
// whether its interpreter is one debugpy_warm.py started ahead (only its
// command line tells).
const pyWarmProbe = `import hashlib, os, sys
def add(a, b):
    total = a + b
    return total
sys.stdout.write("name %s argv %s path0 %s cwd %s\nmain %s xopts %s extra %s\nenv %s\nwarm %s\n" % (
    __name__, sys.argv, sys.path[0], os.getcwd(), sys.modules["__main__"].__file__, sys._xoptions,
    os.environ.get("TETHER_EXTRA"), hashlib.sha256(repr(sorted(os.environ.items())).encode()).hexdigest(),
    "tether-warm-" in open("/proc/self/cmdline").read()))
sys.stderr.write("to stderr\n")
os.write(1, b"fd write\n")
add(2, 3)
if sys.argv[1:] == ["raise"]:
    raise ZeroDivisionError("no ratio here")
sys.exit(7)
`

// runProbe starts the probe with args (and env), stops at add's breakpoint,
// continues to the end and returns its output and exit code.
func runProbe(t *testing.T, m *dap.Manager, args []string, env map[string]string) (string, *int) {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "python", Program: "probe.py", Args: args, Env: env,
		Breakpoints: []dap.FileBreakpoints{{Path: "probe.py", Breakpoints: []dap.SourceBreakpoint{{Line: 3}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{WaitTimeoutMS: 30000})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 || snap.Frames[0].Line != 3 {
		t.Fatalf("snapshot = stop %+v frames %+v, want the breakpoint at line 3", snap.Stop, snap.Frames)
	}
	// justMyCode: the program's frames only, no loader below them.
	if n := len(snap.Frames); n != 2 || snap.Frames[1].Name != "<module>" {
		t.Errorf("frames = %+v, want add and the module", snap.Frames)
	}
	// sys.exit(7) stops once more, on the SystemExit, as in a cold start.
	res, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{Wait: new(true), WaitTimeoutMS: 30000})
	if err == nil && res.State == dap.StateStopped && res.Stop != nil && res.Stop.Exception != nil && res.Stop.Exception.Type == "SystemExit" {
		res, err = s.Control(ctx, dap.CmdContinue, dap.ControlRequest{Wait: new(true), WaitTimeoutMS: 30000})
	}
	if err != nil || res.State != dap.StateEnded {
		t.Fatalf("continue: %+v, %v; want the end", res, err)
	}
	var out string
	testwait.Until(t, 10*time.Second, func() bool {
		out = s.Output(0).Output
		return strings.Contains(out, "fd write") && strings.Contains(out, "to stderr")
	}, "the probe's output")
	return out, s.Info().ExitCode
}

// warmPythonManager is a warm manager whose first (cold) probe run has
// ended and left a warm debugpy; it returns that run's output.
func warmPythonManager(t *testing.T) (*dap.Manager, string) {
	t.Helper()
	root := writeFiles(t, map[string]string{"probe.py": pyWarmProbe})
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "debugpy")
	out, code := runProbe(t, m, []string{"x", "y"}, nil)
	if !strings.Contains(out, "warm False") {
		t.Fatalf("the first start ran in a debuggee started ahead:\n%s", out)
	}
	if code == nil || *code != 7 {
		t.Fatalf("cold exit code = %v, want 7", code)
	}
	awaitWarm(t, m, "debugpy")
	return m, out
}

// A warm Python start runs the program in the debuggee started ahead, and
// the program sees what a cold launch shows it: __name__ "__main__", its
// argv, sys.path[0] its directory, its cwd, debugpy's interpreter options,
// the same environment; its output (print and fd writes, stdout and
// stderr) and its exit code reach the session.
func TestWarmPythonStartRunsTheProgramAsAColdLaunchDoes(t *testing.T) {
	m, cold := warmPythonManager(t)
	warm, code := runProbe(t, m, []string{"x", "y"}, nil)
	if !strings.Contains(warm, "warm True") {
		t.Fatalf("the warm start did not run in the debuggee started ahead:\n%s", warm)
	}
	if !strings.Contains(warm, "name __main__ argv ['") || !strings.Contains(warm, "probe.py', 'x', 'y'] path0") {
		t.Errorf("__name__ or argv differ from a script's:\n%s", warm)
	}
	if code == nil || *code != 7 {
		t.Errorf("warm exit code = %v, want 7", code)
	}
	if got, want := lines(strings.Replace(warm, "warm True", "warm False", 1)), lines(cold); !slices.Equal(got, want) {
		t.Errorf("warm output differs from cold:\n--- cold\n%s\n--- warm\n%s", cold, warm)
	}
}

// An exception stop in a warm start carries the type, message and stack a
// cold one does (the loader is not among the frames).
func TestWarmPythonExceptionStopIsTheColdOne(t *testing.T) {
	root := writeFiles(t, map[string]string{"probe.py": pyWarmProbe})
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "debugpy")
	req := dap.StartRequest{Language: "python", Program: "probe.py", Args: []string{"raise"}}
	cold := stopOf(t, m, req)
	stopAll(t, m)
	awaitWarm(t, m, "debugpy")
	warm := stopOf(t, m, req)
	out := lastSessionOutput(t, m)
	if !strings.Contains(out, "warm True") {
		t.Fatalf("the second start did not run in the debuggee started ahead:\n%s", out)
	}
	if *warm.Exception != *cold.Exception {
		t.Errorf("warm exception = %+v, cold = %+v", *warm.Exception, *cold.Exception)
	}
	if warm.Exception.Type != "ZeroDivisionError" || warm.Exception.Message != "no ratio here" {
		t.Errorf("warm exception = %+v", *warm.Exception)
	}
}

// A launch a debuggee started ahead cannot be (another environment) starts
// its own, with that environment, and the one waiting is ended.
func TestWarmPythonLaunchWithOtherEnvStartsItsOwnDebuggee(t *testing.T) {
	m, _ := warmPythonManager(t)
	out, code := runProbe(t, m, []string{"x", "y"}, map[string]string{"TETHER_EXTRA": "1"})
	if !strings.Contains(out, "warm False") || !strings.Contains(out, "extra 1") {
		t.Fatalf("a launch with env ran in the debuggee started ahead, or without its env:\n%s", out)
	}
	if code == nil || *code != 7 {
		t.Errorf("exit code = %v, want 7", code)
	}
}

// With warm adapters off nothing is started ahead: no warm adapter, and no
// process of debugpy_warm.py.
func TestWarmAdaptersOffStartsNoPythonDebuggeeAhead(t *testing.T) {
	root := writeFiles(t, map[string]string{"probe.py": pyWarmProbe})
	m := newManager(t, root) // WarmAdapters false
	needAdapter(t, m, "debugpy")
	for range 2 {
		if out, _ := runProbe(t, m, nil, nil); !strings.Contains(out, "warm False") {
			t.Fatalf("a debuggee started ahead with warm adapters off:\n%s", out)
		}
	}
	if w := m.WarmAdapters(); len(w) != 0 {
		t.Fatalf("warm adapters = %+v with warm adapters off", w)
	}
	for _, d := range descendants() {
		pid, _, _ := strings.Cut(d, " ")
		if cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline"); strings.Contains(string(cmd), "debugpy_warm") || strings.Contains(string(cmd), "tether-warm-") {
			t.Errorf("a process started ahead with warm adapters off: %s %q", d, cmd)
		}
	}
}

func stopAll(t *testing.T, m *dap.Manager) {
	t.Helper()
	for _, s := range m.List().Sessions {
		if s.State != dap.StateEnded {
			if _, err := m.Stop(ctxFor(t, 30*time.Second), dap.StopRequest{SessionID: s.SessionID}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// lastSessionOutput is the output of the newest session so far.
func lastSessionOutput(t *testing.T, m *dap.Manager) string {
	t.Helper()
	list := m.List().Sessions
	s, err := m.Session(list[len(list)-1].SessionID)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	testwait.Until(t, 10*time.Second, func() bool {
		out = s.Output(0).Output
		return strings.Contains(out, "warm ")
	}, "the probe's output")
	return out
}

// lines is the output's stdout lines, without the one stderr line (the two
// streams interleave as they come, even within a line).
func lines(s string) []string {
	var out []string
	for l := range strings.SplitSeq(strings.Replace(s, "to stderr\n", "", 1), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// stopOnEntry with justMyCode false: the warm start stops on the program's
// first line with the stack a cold one has, down to runpy's frames (the
// loader's frame hidden as debugpy's own __main__ is), then runs to its
// end in the debuggee started ahead.
func TestWarmPythonEntryStopShowsTheColdStack(t *testing.T) {
	root := writeFiles(t, map[string]string{"probe.py": pyWarmProbe})
	m := newWarmManager(t, root, 0)
	needAdapter(t, m, "debugpy")
	cfg := func() map[string]any {
		return map[string]any{"type": "debugpy", "request": "launch", "name": "probe",
			"program": filepath.Join(root, "probe.py"), "cwd": root, "stopOnEntry": true, "justMyCode": false}
	}
	entry := func() ([]dap.Frame, string) {
		ctx := ctxFor(t, 90*time.Second)
		start, err := m.Start(ctx, dap.StartRequest{Config: cfg()})
		if err != nil {
			t.Fatal(err)
		}
		s, err := m.Session(start.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := s.Snapshot(ctx, dap.SnapshotRequest{WaitTimeoutMS: 30000})
		if err != nil {
			t.Fatal(err)
		}
		if snap.Stop == nil || snap.Stop.Reason != "entry" || len(snap.Frames) == 0 || snap.Frames[0].Line != 1 {
			t.Fatalf("snapshot = stop %+v frames %+v, want the entry at line 1", snap.Stop, snap.Frames)
		}
		for range 5 {
			res, err := s.Control(ctx, dap.CmdContinue, dap.ControlRequest{Wait: new(true), WaitTimeoutMS: 30000})
			if err != nil {
				t.Fatal(err)
			}
			if res.State == dap.StateEnded {
				break
			}
		}
		var out string
		testwait.Until(t, 10*time.Second, func() bool {
			out = s.Output(0).Output
			return strings.Contains(out, "warm ")
		}, "the probe's output")
		for i := range snap.Frames {
			snap.Frames[i].ID = 0
		}
		return snap.Frames, out
	}
	cold, out := entry()
	if !strings.Contains(out, "warm False") {
		t.Fatalf("the first start ran in a debuggee started ahead:\n%s", out)
	}
	awaitWarm(t, m, "debugpy")
	warm, out := entry()
	if !strings.Contains(out, "warm True") {
		t.Fatalf("the second start did not run in the debuggee started ahead:\n%s", out)
	}
	if !slices.Equal(warm, cold) {
		t.Errorf("warm frames = %+v, cold = %+v", warm, cold)
	}
	if len(cold) < 2 || !strings.HasSuffix(cold[len(cold)-1].Path, "runpy.py") {
		t.Errorf("cold frames = %+v, want runpy's below the program (justMyCode false)", cold)
	}
}

// A launcher or debuggee started ahead that died while it waited (killed,
// out of memory) is not taken: the launch starts its own, as a cold one,
// and runs.
func TestWarmPythonWhoseProcessesDiedStartsAsCold(t *testing.T) {
	for _, role := range []string{"debuggee", "launcher"} {
		t.Run(role, func(t *testing.T) {
			m, _ := warmPythonManager(t)
			var pid int
			testwait.Until(t, 10*time.Second, func() bool {
				for _, d := range descendants() {
					p, _, _ := strings.Cut(d, " ")
					cmd, _ := os.ReadFile("/proc/" + p + "/cmdline")
					args := strings.Split(string(cmd), "\x00")
					if (role == "launcher" && slices.Contains(args, "launcher") && strings.Contains(string(cmd), "debugpy_warm.py")) ||
						(role == "debuggee" && strings.Contains(string(cmd), "/debuggee-")) {
						pid, _ = strconv.Atoi(p)
						return true
					}
				}
				return false
			}, "the %s started ahead", role)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			out, code := runProbe(t, m, []string{"x", "y"}, nil)
			if !strings.Contains(out, "warm False") {
				t.Fatalf("the launch ran in a debuggee started ahead whose %s was killed:\n%s", role, out)
			}
			if code == nil || *code != 7 {
				t.Errorf("exit code = %v, want 7", code)
			}
		})
	}
}

// A debuggee started ahead read its site directories when it started: one
// made since (a first pip install --user) would be missing from its
// sys.path, so the launch starts its own.
func TestWarmPythonAfterASiteDirectoryChangedStartsAsCold(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	m, _ := warmPythonManager(t)
	out, err := exec.Command("python3", "-c", "import site; print(site.getusersitepackages())").Output()
	if err != nil {
		t.Fatal(err)
	}
	userSite := strings.TrimSpace(string(out))
	if !strings.HasPrefix(userSite, home) {
		t.Skipf("the user site directory %s is not under HOME", userSite)
	}
	if err := os.MkdirAll(userSite, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(userSite, "tether_probe.pth"), []byte(home+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, code := runProbe(t, m, []string{"x", "y"}, nil)
	if !strings.Contains(got, "warm False") {
		t.Fatalf("the launch ran in a debuggee started before the user site directory existed:\n%s", got)
	}
	if code == nil || *code != 7 {
		t.Errorf("exit code = %v, want 7", code)
	}
}

// An attach by process id that takes the warm debugpy runs no launcher:
// the launcher and debuggee started ahead are ended at once, not kept for
// as long as the attached session lasts.
func TestWarmPythonAttachEndsTheDebuggeeStartedAhead(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import debugpy").Run(); err != nil {
		t.Skipf("/usr/bin/python3 cannot import debugpy: %v", err)
	}
	m, _ := warmPythonManager(t)
	w := awaitWarm(t, m, "debugpy")
	ahead := func() []string {
		var found []string
		for _, d := range descendants() {
			p, _, _ := strings.Cut(d, " ")
			cmd, _ := os.ReadFile("/proc/" + p + "/cmdline")
			args := strings.Split(string(cmd), "\x00")
			if (slices.Contains(args, "launcher") && strings.Contains(string(cmd), "debugpy_warm.py")) || strings.Contains(string(cmd), "/debuggee-") {
				found = append(found, d)
			}
		}
		return found
	}
	testwait.Until(t, 10*time.Second, func() bool { return len(ahead()) == 2 }, "the launcher and debuggee started ahead")

	dir := writeFiles(t, map[string]string{"beat.py": "import time\nwhile True:\n    time.sleep(0.05)\n"})
	target := exec.Command("/usr/bin/python3", "beat.py")
	target.Dir = dir
	target.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-target.Process.Pid, syscall.SIGKILL)
		_ = target.Wait()
	})
	res, err := m.Start(ctxFor(t, 60*time.Second), dap.StartRequest{Language: "python", Request: "attach", Pid: target.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	if !alive(w.Pid) {
		t.Fatalf("the warm debugpy (pid %d) is gone: the attach did not take it, so this test shows nothing", w.Pid)
	}
	testwait.Until(t, 10*time.Second, func() bool { return len(ahead()) == 0 }, "the processes started ahead to end")
	if _, err := m.Stop(ctxFor(t, 30*time.Second), dap.StopRequest{SessionID: res.SessionID}); err != nil {
		t.Fatal(err)
	}
}
