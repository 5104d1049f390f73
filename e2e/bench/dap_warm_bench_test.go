package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testwait"
)

// targetWarmRatio is the bound: a warm start's first stop at most
// half a cold one's.
const targetWarmRatio = 0.5

// warmLang is one language of BenchmarkDebugWarmStart.
type warmLang struct {
	name  string
	start map[string]any // the start-session payload (one breakpoint)
	comm  string         // how the warm adapter's process name starts (for JavaScript the warm node's)
	bare  func(tb testing.TB) time.Duration
}

// BenchmarkDebugWarmStart measures start → breakpoint → snapshot per
// language through two bridges on one workspace, one with warm adapters
// (the default) and one with --warm-adapters=false, against a bare go-dap
// client driving the same adapter (for Node, whose built-in adapter runs in
// the bridge, the bare CDP client of BenchmarkDebugNodeStartToSnapshot),
// alternating in the same run. It reports medians and the median of the
// per-run ratios warm/cold, then the idle cost of the warm adapters: their
// resident memory and their CPU over an idle period. Before a timed warm
// run the warm adapter the previous one left must be running (the bench
// waits for it, as an agent editing between sessions gives it time to
// start; a replacement starts once the session that took one has ended).
func BenchmarkDebugWarmStart(b *testing.B) {
	bin := tetherBin(b)
	root := b.TempDir()
	langs := warmLangs(b, root)
	brk, secret := startBroker(b, bin)
	warmBridge := startDebugBridge(b, bin, brk, secret, "warm-bench", root)
	startDebugBridge(b, bin, brk, secret, "cold-bench", root, "--warm-adapters=false")
	warm, cold := debugClient(b, brk, secret, "warm-bench"), debugClient(b, brk, secret, "cold-bench")
	runs := benchRuns()

	fmt.Printf("\ndap start→breakpoint→snapshot, warm adapters against cold, %d runs per language on %d cores (medians)\n", runs, goruntime.NumCPU())
	fmt.Printf("  %-11s %9s %9s %9s %11s %s\n", "language", "cold ms", "warm ms", "bare ms", "warm/cold", "(target ≤ 0.5×)")
	for _, l := range langs {
		// Untimed: page cache, the bridges' lookups, the first (cold)
		// start that leaves a warm adapter behind.
		l.bare(b)
		cold.startToSnapshot(b, l.start)
		warm.startToSnapshot(b, l.start)
		var ws, cs, bs, ratios []float64
		for range runs {
			// Every timed run begins with the warm adapter made, so that
			// no replacement starting in the background is timed.
			awaitWarm(b, warmBridge, l.comm)
			wt := warm.startToSnapshot(b, l.start)
			awaitWarm(b, warmBridge, l.comm)
			ct := cold.startToSnapshot(b, l.start)
			bt := l.bare(b)
			ws, cs, bs = append(ws, ms(wt)), append(cs, ms(ct)), append(bs, ms(bt))
			ratios = append(ratios, ms(wt)/ms(ct))
		}
		r := median(ratios)
		fmt.Printf("  %-11s %9.1f %9.1f %9.1f %10.2f× %s  (per run: %s)\n", l.name, median(cs), median(ws), median(bs), r,
			verdict(r <= targetWarmRatio), formatRatios(ratios))
		b.ReportMetric(r, l.name+"-warm/cold")
	}
	for _, l := range langs {
		awaitWarm(b, warmBridge, l.comm)
	}
	reportWarmIdleCost(b, warmBridge)
}

// awaitWarm waits until the warm bridge runs an adapter whose name starts
// with comm and every process of that name under the bridge (a warm
// debugpy is three: its adapter, the launcher and the debuggee started
// ahead, which imports pydevd after the adapter settles) has used no CPU,
// and none has come or gone, for warmSettle: started, initialized and
// waiting. Watching the first such process alone timed the first warm
// Python run while its debuggee still imported pydevd (0.52-0.67x
// against 0.19-0.25x for the others).
func awaitWarm(tb testing.TB, bridge *proc, comm string) {
	tb.Helper()
	if comm == "" {
		return
	}
	const warmSettle = 150 * time.Millisecond
	cpus, since := map[int]time.Duration{}, time.Time{}
	testwait.Until(tb, 30*time.Second, func() bool {
		now := map[int]time.Duration{}
		for _, q := range proctree.Descendants(bridge.pid()) {
			if strings.HasPrefix(q.Comm(), comm) {
				now[q.Pid] = cpuTime(q.Pid)
			}
		}
		if len(now) == 0 {
			cpus = now
			return false
		}
		if !maps.Equal(now, cpus) {
			cpus, since = now, time.Now()
		}
		return time.Since(since) >= warmSettle
	}, "a warm %s under the bridge", comm)
}

// reportWarmIdleCost prints the resident memory of every warm adapter (and
// anything below it) and the CPU they use over an idle period.
func reportWarmIdleCost(tb testing.TB, bridge *proc) {
	const idle = 5 * time.Second
	procs := proctree.Descendants(bridge.pid())
	before := map[int]time.Duration{}
	for _, q := range procs {
		before[q.Pid] = cpuTime(q.Pid)
	}
	time.Sleep(idle) // the period measured
	var total int64
	var cpu time.Duration
	var parts []string
	for _, q := range procs {
		rss := rssKB(q.Pid)
		used := cpuTime(q.Pid) - before[q.Pid]
		total += rss
		cpu += used
		parts = append(parts, fmt.Sprintf("%s %.1f MB", q.Comm(), float64(rss)/1024))
	}
	slices.Sort(parts)
	fmt.Printf("  idle cost of the warm adapters: %.1f MB resident (%s); CPU %v over %v idle (%.2f%% of a core)\n",
		float64(total)/1024, strings.Join(parts, ", "), cpu, idle, 100*cpu.Seconds()/idle.Seconds())
}

// rssKB is pid's resident set (VmRSS) in KiB, 0 if unknown.
func rssKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

const warmBenchPy = "def add(a, b):\n    total = a + b\n    return total\n\nprint(add(2, 3))\n"

const warmBenchGo = "package main\n\nimport \"fmt\"\n\nfunc add(a, b int) int {\n\ttotal := a + b\n\treturn total\n}\n\nfunc main() {\n\tfmt.Println(add(2, 3))\n}\n"

// warmLangs writes each language's program into root and says how to run
// it: through tether, and bare.
func warmLangs(b *testing.B, root string) []warmLang {
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	writeDebugBenchC(b, root)
	write("add.py", warmBenchPy)
	goDir := filepath.Join(root, "goadd")
	if err := os.Mkdir(goDir, 0o755); err != nil {
		b.Fatal(err)
	}
	write("goadd/go.mod", "module goadd\n\ngo 1.21\n")
	write("goadd/main.go", warmBenchGo)
	write("calc.js", string(debugBenchJS))

	bp := func(path string, line int) []map[string]any {
		return []map[string]any{{"path": path, "breakpoints": []map[string]any{{"line": line}}}}
	}
	var langs []warmLang
	if lldb := lookFirst("lldb-dap-19", "lldb-dap"); lldb != "" {
		langs = append(langs, warmLang{name: "C", comm: "lldb-dap",
			start: map[string]any{"language": "c", "program": "add_numbers", "breakpoints": bp("add_numbers.c", 4)},
			bare:  func(tb testing.TB) time.Duration { return bareScenario(tb, lldb, root) }})
	}
	if py := pythonWithDebugpy(); py != "" {
		langs = append(langs, warmLang{name: "Python", comm: "python",
			start: map[string]any{"language": "python", "program": "add.py", "breakpoints": bp("add.py", 3)},
			bare: func(tb testing.TB) time.Duration {
				return bareDAPScenario(tb, []string{py, "-m", "debugpy.adapter"}, root, false,
					map[string]any{"program": filepath.Join(root, "add.py"), "cwd": root, "console": "internalConsole", "justMyCode": true},
					filepath.Join(root, "add.py"), 3)
			}})
	}
	if dlv := lookFirst("dlv"); dlv != "" {
		langs = append(langs, warmLang{name: "Go", comm: "dlv",
			start: map[string]any{"language": "go", "program": "goadd", "breakpoints": bp("goadd/main.go", 7)},
			bare: func(tb testing.TB) time.Duration {
				return bareDAPScenario(tb, []string{dlv, "dap", "--listen", "127.0.0.1:0"}, goDir, true,
					map[string]any{"mode": "debug", "program": goDir, "cwd": goDir},
					filepath.Join(goDir, "main.go"), 7)
			}})
	}
	if nodePath := lookFirst("node"); nodePath != "" {
		langs = append(langs, warmLang{name: "JavaScript", comm: "node",
			start: map[string]any{"language": "javascript", "program": "calc.js", "breakpoints": bp("calc.js", 6)},
			bare:  func(tb testing.TB) time.Duration { return bareNodeScenario(tb, nodePath, root) }})
	}
	if only := os.Getenv("BENCH_LANGS"); only != "" {
		// BENCH_LANGS=Go,C (names as printed, any case) times only those.
		langs = slices.DeleteFunc(langs, func(l warmLang) bool {
			return !slices.ContainsFunc(strings.Split(only, ","), func(n string) bool { return strings.EqualFold(strings.TrimSpace(n), l.name) })
		})
	}
	if len(langs) == 0 {
		b.Skip("no debug adapter is installed (or none in BENCH_LANGS)")
	}
	return langs
}

// pythonWithDebugpy is the first python3 that imports debugpy, the one on
// PATH or the system's, as the bridge looks for it.
func pythonWithDebugpy() string {
	for _, py := range []string{lookFirst("python3"), "/usr/bin/python3"} {
		if py != "" && exec.Command(py, "-c", "import debugpy").Run() == nil {
			return py
		}
	}
	return ""
}

func lookFirst(names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

var dapListenLine = regexp.MustCompile(`listening at:?\s*\[?([0-9.:]+?)\]?:(\d+)`)

// bareDAPScenario is bareScenario for any adapter: argv started in dir
// (over stdio, or on the TCP port it prints when listen), one launch with
// args, one breakpoint at src:line, the locals of the stop.
func bareDAPScenario(tb testing.TB, argv []string, dir string, listen bool, args map[string]any, src string, line int) time.Duration {
	tb.Helper()
	began := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GO_TELEMETRY_CHILD=2")
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{Setpgid: true}, syscall.SIGKILL)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", argv[0], err)
	}
	watchdog := time.AfterFunc(60*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer watchdog.Stop()
	defer func() {
		_ = stdin.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	var r io.Reader = stdout
	var w io.Writer = stdin
	if listen {
		sc := bufio.NewScanner(stdout)
		addr := ""
		for addr == "" && sc.Scan() {
			if m := dapListenLine.FindStringSubmatch(sc.Text()); m != nil {
				addr = net.JoinHostPort(m[1], m[2])
			}
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatalf("bare: connecting to %s at %q: %v", argv[0], addr, err)
		}
		defer conn.Close()
		r, w = conn, conn
	}
	d := &bareDAP{tb: tb, w: w, r: bufio.NewReader(r), seen: map[string][]godap.Message{}, responses: map[int]godap.Message{}}
	d.await(d.send(&godap.InitializeRequest{Request: godap.Request{Command: "initialize"},
		Arguments: godap.InitializeRequestArguments{ClientID: "bare", AdapterID: "bare", LinesStartAt1: true, ColumnsStartAt1: true, PathFormat: "path"}}))
	launchArgs, _ := json.Marshal(args)
	launchSeq := d.send(&godap.LaunchRequest{Request: godap.Request{Command: "launch"}, Arguments: launchArgs})
	d.awaitEvent("initialized")
	bp := d.await(d.send(&godap.SetBreakpointsRequest{Request: godap.Request{Command: "setBreakpoints"},
		Arguments: godap.SetBreakpointsArguments{Source: godap.Source{Path: src}, Breakpoints: []godap.SourceBreakpoint{{Line: line}}}})).(*godap.SetBreakpointsResponse)
	if len(bp.Body.Breakpoints) != 1 {
		tb.Fatalf("bare: breakpoints %+v", bp.Body)
	}
	d.await(d.send(&godap.ConfigurationDoneRequest{Request: godap.Request{Command: "configurationDone"}}))
	d.await(launchSeq)
	stopped := d.awaitEvent("stopped").(*godap.StoppedEvent)
	st := d.await(d.send(&godap.StackTraceRequest{Request: godap.Request{Command: "stackTrace"},
		Arguments: godap.StackTraceArguments{ThreadId: stopped.Body.ThreadId, Levels: 20}})).(*godap.StackTraceResponse)
	sc := d.await(d.send(&godap.ScopesRequest{Request: godap.Request{Command: "scopes"},
		Arguments: godap.ScopesArguments{FrameId: st.Body.StackFrames[0].Id}})).(*godap.ScopesResponse)
	vars := d.await(d.send(&godap.VariablesRequest{Request: godap.Request{Command: "variables"},
		Arguments: godap.VariablesArguments{VariablesReference: sc.Body.Scopes[0].VariablesReference}})).(*godap.VariablesResponse)
	took := time.Since(began)
	if len(vars.Body.Variables) == 0 {
		tb.Fatalf("bare: no locals at %s:%d", src, line)
	}
	d.send(&godap.DisconnectRequest{Request: godap.Request{Command: "disconnect"}, Arguments: &godap.DisconnectArguments{TerminateDebuggee: true}})
	return took
}
