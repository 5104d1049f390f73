package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/debugger"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	godap "github.com/google/go-dap"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/dap/node"
	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testwait"
)

// debugBenchC is the C scenario's program (dap's test program; line 4 is
// `return sum;`).
var debugBenchC = func() []byte {
	b, err := os.ReadFile("../../dap/testdata/add_numbers.c")
	if err != nil {
		panic(err)
	}
	return b
}()

// targetDebugRatio is the bound: tether at most 1.2× the bare client.
const targetDebugRatio = 1.2

// BenchmarkDebugStartToSnapshot measures the C scenario, start → verified
// breakpoint → snapshot with locals, through tether (HTTP caller → broker →
// bridge → lldb-dap) against a bare go-dap client driving lldb-dap-19
// directly, alternating in the same run (STYLE.md, lesson 10). Each run
// starts a fresh adapter and debuggee; stopping them is not timed.
func BenchmarkDebugStartToSnapshot(b *testing.B) {
	bin := tetherBin(b)
	lldbDAP := lookFirst("lldb-dap-19", "lldb-dap")
	if lldbDAP == "" {
		b.Skip("lldb-dap is not installed")
	}
	root := b.TempDir()
	writeDebugBenchC(b, root)
	runs := benchRuns()
	tc := startDebugBench(b, bin, "dap-bench", root)

	// One untimed round each: page cache, the bridge's adapter lookup.
	bareScenario(b, lldbDAP, root)
	tc.scenario(b)

	var bare, through, ratios []float64
	for range runs {
		bt := bareScenario(b, lldbDAP, root)
		tt := tc.scenario(b)
		bare, through = append(bare, ms(bt)), append(through, ms(tt))
		ratios = append(ratios, ms(tt)/ms(bt))
	}
	ratio := median(ratios)
	fmt.Printf("\ndap start→verified breakpoint→snapshot, C scenario, %d runs (medians)\n", runs)
	fmt.Printf("  bare go-dap → %s: %.1f ms\n", filepath.Base(lldbDAP), median(bare))
	fmt.Printf("  through tether:        %.1f ms\n", median(through))
	fmt.Printf("  ratio tether/bare:     %.2f× (median of per-run ratios; target ≤ %.1f×) %s\n", ratio, targetDebugRatio, verdict(ratio <= targetDebugRatio))
	b.ReportMetric(median(bare), "bare-ms")
	b.ReportMetric(median(through), "tether-ms")
	b.ReportMetric(ratio, "ratio")
}

// benchRuns is how many timed rounds a debug benchmark makes: BENCH_RUNS,
// default 7.
func benchRuns() int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_RUNS")); err == nil && v > 0 {
		return v
	}
	return 7
}

// writeDebugBenchC writes the C scenario's program into root and builds it
// (add_numbers).
func writeDebugBenchC(tb testing.TB, root string) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(root, "add_numbers.c"), debugBenchC, 0o644); err != nil {
		tb.Fatal(err)
	}
	gcc := exec.Command("gcc", "-g", "-O0", "-o", "add_numbers", "add_numbers.c")
	gcc.Dir = root
	if out, err := gcc.CombinedOutput(); err != nil {
		tb.Fatalf("gcc: %v\n%s", err, out)
	}
}

// startDebugBench starts a broker and a bridge serving root as workspace
// ws, and returns a caller for it. The bridge's warm adapters are off:
// these benchmarks time a fresh adapter per run against a bare client
// that starts one too (BenchmarkDebugWarmStart times warm ones), and a
// warm adapter made in the background would also compete with the bare
// run for the CPU.
func startDebugBench(b *testing.B, bin, ws, root string) *tetherDebugClient {
	brk, secret := startBroker(b, bin)
	startDebugBridge(b, bin, brk, secret, ws, root, "--warm-adapters=false")
	return debugClient(b, brk, secret, ws)
}

// debugClient is a caller of workspace ws through the broker brk.
func debugClient(tb testing.TB, brk *server, secret []byte, ws string) *tetherDebugClient {
	tc := &tetherDebugClient{
		client: controlClient(tb),
		url:    brk.url + "/api/v1/workspaces/" + ws + "/calls",
		token:  mintToken(tb, secret, auth.RoleCaller, ws),
	}
	tc.client.Timeout = 60 * time.Second
	return tc
}

// startDebugBridge starts `tether bridge` serving root (with extra flags)
// and waits until the broker lists it.
func startDebugBridge(tb testing.TB, bin string, brk *server, secret []byte, ws, root string, extra ...string) *proc {
	tb.Helper()
	p := startProc(tb, "bridge", bin, append([]string{"bridge", "--broker", brk.url, "--workspace", ws,
		"--token", mintToken(tb, secret, auth.RoleBridge, ws), "--root", root, "--log-level", "warn"}, extra...))
	caller := mintToken(tb, secret, auth.RoleCaller, auth.AnyWorkspace)
	client := controlClient(tb)
	if !testwait.Within(15*time.Second, func() bool {
		if p.exited() {
			tb.Fatalf("bridge exited while connecting: %v\n%s", p.Err(), p.logTail())
		}
		list, err := listWorkspaces(client, brk.url, caller)
		return err == nil && list[ws]
	}) {
		tb.Fatalf("broker did not list %q within 15s\n%s", ws, p.logTail())
	}
	return p
}

type tetherDebugClient struct {
	client *http.Client
	url    string
	token  string
}

func (c *tetherDebugClient) call(tb testing.TB, endpoint string, payload, out any) {
	tb.Helper()
	body, _ := json.Marshal(map[string]any{"endpoint": endpoint, "payload": payload, "timeout": 60})
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.client.Do(req)
	if err != nil {
		tb.Fatalf("%s: %v", endpoint, err)
	}
	defer res.Body.Close()
	var resp struct {
		Success bool            `json:"success"`
		Result  json.RawMessage `json:"result"`
		Error   string          `json:"error"`
		Message string          `json:"message"`
	}
	if err := json.NewDecoder(res.Body).Decode(&resp); err != nil || !resp.Success {
		tb.Fatalf("%s: %v %s %s", endpoint, err, resp.Error, resp.Message)
	}
	if out != nil {
		if err := json.Unmarshal(resp.Result, out); err != nil {
			tb.Fatalf("%s result: %v", endpoint, err)
		}
	}
}

// scenario returns the time from start-session to a snapshot with locals,
// for the C program.
func (c *tetherDebugClient) scenario(tb testing.TB) time.Duration {
	return c.startToSnapshot(tb, map[string]any{
		"language": "c", "program": "add_numbers",
		"breakpoints": []map[string]any{{"path": "add_numbers.c", "breakpoints": []map[string]any{{"line": 4}}}},
	})
}

// startToSnapshot returns the time from start-session (with start, which
// sets one breakpoint) to a snapshot with locals; the session is stopped
// after, untimed.
func (c *tetherDebugClient) startToSnapshot(tb testing.TB, start map[string]any) time.Duration {
	tb.Helper()
	began := time.Now()
	var started struct {
		SessionID   string `json:"session_id"`
		Breakpoints []struct {
			Verified bool `json:"verified"`
		} `json:"breakpoints"`
	}
	c.call(tb, "/api/debug/start-session", start, &started)
	if len(started.Breakpoints) != 1 || !started.Breakpoints[0].Verified {
		tb.Fatalf("tether breakpoint not verified: %+v", started)
	}
	var snap struct {
		Locals []struct{ Name, Value string } `json:"locals"`
	}
	c.call(tb, "/api/debug/snapshot", map[string]any{"session_id": started.SessionID}, &snap)
	took := time.Since(began)
	if len(snap.Locals) < 3 {
		tb.Fatalf("tether snapshot locals: %+v", snap.Locals)
	}
	c.call(tb, "/api/debug/stop-session", map[string]any{"session_id": started.SessionID}, nil)
	return took
}

// bareDAP is the baseline: the least a go-dap program does to reach the
// same answer, one goroutine reading and writing in turn.
type bareDAP struct {
	tb  testing.TB
	w   io.Writer
	r   *bufio.Reader
	seq int
	// events seen while waiting for responses, by name, and responses
	// seen while waiting for events, by request seq
	seen      map[string][]godap.Message
	responses map[int]godap.Message
}

func (d *bareDAP) send(req godap.RequestMessage) int {
	d.seq++
	r := req.GetRequest()
	r.Seq, r.Type = d.seq, "request"
	if err := godap.WriteProtocolMessage(d.w, req); err != nil {
		d.tb.Fatalf("bare: writing %s: %v", r.Command, err)
	}
	return d.seq
}

// next reads the next message go-dap can decode (it rejects events it does
// not know; those are skipped).
func (d *bareDAP) next() godap.Message {
	for {
		raw, err := godap.ReadBaseMessage(d.r)
		if err != nil {
			d.tb.Fatalf("bare: reading: %v", err)
		}
		m, err := godap.DecodeProtocolMessage(raw)
		if err == nil {
			return m
		}
	}
}

func (d *bareDAP) await(seq int) godap.Message {
	m, ok := d.responses[seq]
	delete(d.responses, seq)
	for {
		if !ok {
			m = d.next()
		}
		ok = false
		if r, isResp := m.(godap.ResponseMessage); isResp && r.GetResponse().RequestSeq == seq {
			if !r.GetResponse().Success {
				d.tb.Fatalf("bare: %s failed: %s", r.GetResponse().Command, r.GetResponse().Message)
			}
			return m
		}
		if r, isResp := m.(godap.ResponseMessage); isResp {
			d.responses[r.GetResponse().RequestSeq] = m
		}
		if e, isEvent := m.(godap.EventMessage); isEvent {
			name := e.GetEvent().Event
			d.seen[name] = append(d.seen[name], m)
		}
	}
}

func (d *bareDAP) awaitEvent(name string) godap.Message {
	if ms := d.seen[name]; len(ms) > 0 {
		d.seen[name] = ms[1:]
		return ms[0]
	}
	for {
		m := d.next()
		if e, ok := m.(godap.EventMessage); ok && e.GetEvent().Event == name {
			return m
		}
		if r, ok := m.(godap.ResponseMessage); ok {
			d.responses[r.GetResponse().RequestSeq] = m
		}
	}
}

func bareScenario(tb testing.TB, lldbDAP, root string) time.Duration {
	tb.Helper()
	began := time.Now()
	cmd := exec.Command(lldbDAP)
	cmd.Dir = root
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{Setpgid: true}, syscall.SIGKILL)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", lldbDAP, err)
	}
	// A stuck adapter fails the benchmark instead of hanging it.
	watchdog := time.AfterFunc(60*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer watchdog.Stop()
	defer func() {
		_ = stdin.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	d := &bareDAP{tb: tb, w: stdin, r: bufio.NewReader(stdout), seen: map[string][]godap.Message{}, responses: map[int]godap.Message{}}

	d.await(d.send(&godap.InitializeRequest{Request: godap.Request{Command: "initialize"},
		Arguments: godap.InitializeRequestArguments{ClientID: "bare", AdapterID: "lldb-dap", LinesStartAt1: true, ColumnsStartAt1: true, PathFormat: "path"}}))
	launchArgs, _ := json.Marshal(map[string]any{"program": filepath.Join(root, "add_numbers"), "cwd": root})
	launchSeq := d.send(&godap.LaunchRequest{Request: godap.Request{Command: "launch"}, Arguments: launchArgs})
	d.awaitEvent("initialized")
	bp := d.await(d.send(&godap.SetBreakpointsRequest{Request: godap.Request{Command: "setBreakpoints"},
		Arguments: godap.SetBreakpointsArguments{Source: godap.Source{Path: filepath.Join(root, "add_numbers.c")},
			Breakpoints: []godap.SourceBreakpoint{{Line: 4}}}})).(*godap.SetBreakpointsResponse)
	if len(bp.Body.Breakpoints) != 1 || !bp.Body.Breakpoints[0].Verified {
		tb.Fatalf("bare: breakpoint not verified: %+v", bp.Body)
	}
	d.await(d.send(&godap.ConfigurationDoneRequest{Request: godap.Request{Command: "configurationDone"}}))
	d.await(launchSeq)
	stopped := d.awaitEvent("stopped").(*godap.StoppedEvent)
	st := d.await(d.send(&godap.StackTraceRequest{Request: godap.Request{Command: "stackTrace"},
		Arguments: godap.StackTraceArguments{ThreadId: stopped.Body.ThreadId, Levels: 20}})).(*godap.StackTraceResponse)
	sc := d.await(d.send(&godap.ScopesRequest{Request: godap.Request{Command: "scopes"},
		Arguments: godap.ScopesArguments{FrameId: st.Body.StackFrames[0].Id}})).(*godap.ScopesResponse)
	i := slices.IndexFunc(sc.Body.Scopes, func(s godap.Scope) bool { return s.Name == "Locals" })
	vars := d.await(d.send(&godap.VariablesRequest{Request: godap.Request{Command: "variables"},
		Arguments: godap.VariablesArguments{VariablesReference: sc.Body.Scopes[max(i, 0)].VariablesReference}})).(*godap.VariablesResponse)
	took := time.Since(began)
	if len(vars.Body.Variables) < 3 {
		tb.Fatalf("bare: locals %+v", vars.Body.Variables)
	}
	d.await(d.send(&godap.DisconnectRequest{Request: godap.Request{Command: "disconnect"}, Arguments: &godap.DisconnectArguments{TerminateDebuggee: true}}))
	return took
}

// debugBenchJS is the Node scenario's program (dap/node's test program;
// line 6 is `return r;` in mul).
var debugBenchJS = func() []byte {
	b, err := os.ReadFile("../../dap/node/testdata/programs/calc.js")
	if err != nil {
		panic(err)
	}
	return b
}()

// BenchmarkDebugNodeStartToSnapshot measures the Node scenario, start →
// verified breakpoint → snapshot with locals, through tether (HTTP caller →
// broker → bridge → the built-in CDP adapter → node) against a bare CDP
// client in Go driving node --inspect-brk directly (the same WebSocket and
// cdproto layer, dap/node's Conn, without the DAP server, the session or
// the routes), alternating in the same run. Each run starts a fresh node;
// stopping it is not timed.
func BenchmarkDebugNodeStartToSnapshot(b *testing.B) {
	bin := tetherBin(b)
	nodePath, err := exec.LookPath("node")
	if err != nil {
		b.Skip("node is not installed")
	}
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "calc.js"), debugBenchJS, 0o644); err != nil {
		b.Fatal(err)
	}
	runs := benchRuns()
	tc := startDebugBench(b, bin, "node-bench", root)

	bareNodeScenario(b, nodePath, root) // untimed: page cache, the bridge's lookups
	tc.nodeScenario(b)
	var bare, through, ratios []float64
	for range runs {
		bt := bareNodeScenario(b, nodePath, root)
		tt := tc.nodeScenario(b)
		bare, through = append(bare, ms(bt)), append(through, ms(tt))
		ratios = append(ratios, ms(tt)/ms(bt))
	}
	ratio := median(ratios)
	fmt.Printf("\ndap start→verified breakpoint→snapshot, Node scenario, %d runs on %d cores\n", runs, goruntime.NumCPU())
	fmt.Printf("  per-run ratios:        %s\n", formatRatios(ratios))
	fmt.Printf("  bare CDP client (Go):  %.1f ms (median)\n", median(bare))
	fmt.Printf("  through tether:        %.1f ms (median)\n", median(through))
	fmt.Printf("  ratio tether/bare:     %.2f× (median of per-run ratios; target ≤ %.1f×) %s\n", ratio, targetDebugRatio, verdict(ratio <= targetDebugRatio))
	b.ReportMetric(median(bare), "bare-ms")
	b.ReportMetric(median(through), "tether-ms")
	b.ReportMetric(ratio, "ratio")
}

func formatRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(parts, " ")
}

// nodeScenario returns the time from start-session to a snapshot with
// locals, for the Node program.
func (c *tetherDebugClient) nodeScenario(tb testing.TB) time.Duration {
	return c.startToSnapshot(tb, map[string]any{
		"language": "javascript", "program": "calc.js",
		"breakpoints": []map[string]any{{"path": "calc.js", "breakpoints": []map[string]any{{"line": 6}}}},
	})
}

// bareNodeScenario is the baseline: the least a CDP client does to reach
// the same answer: node --inspect-brk, its URL from stderr, enable, run to
// the first line, one breakpoint by URL, resume, the locals of the pause.
func bareNodeScenario(tb testing.TB, nodePath, root string) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	script := filepath.Join(root, "calc.js")
	cmd := exec.Command(nodePath, "--inspect-brk=127.0.0.1:0", script)
	cmd.Dir = root
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{Setpgid: true}, syscall.SIGKILL)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting node: %v", err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := node.ParseInspectorURL(sc.Text()); ok {
				urlc <- u
			}
		}
	}()
	var wsURL string
	select {
	case wsURL = <-urlc:
	case <-ctx.Done():
		tb.Fatal("bare: node printed no inspector URL")
	}
	paused := make(chan debugger.EventPaused, 8)
	conn, err := node.Dial(ctx, wsURL, node.DialOptions{OnEvent: func(method string, params jsonv2.Value) {
		if method == debugger.Paused.Method {
			var ev debugger.EventPaused
			if jsonv2.Unmarshal(params, &ev) == nil {
				paused <- ev
			}
		}
	}})
	if err != nil {
		tb.Fatalf("bare: %v", err)
	}
	defer conn.Close()
	must := func(err error) {
		if err != nil {
			tb.Fatalf("bare: %v", err)
		}
	}
	_, err = cdp.Call(ctx, conn, cdpruntime.Enable, cdp.Empty{})
	must(err)
	_, err = cdp.Call(ctx, conn, debugger.Enable, debugger.EnableParams{})
	must(err)
	_, err = cdp.Call(ctx, conn, cdpruntime.RunIfWaitingForDebugger, cdp.Empty{})
	must(err)
	<-paused // the first line
	bp, err := cdp.Call(ctx, conn, debugger.SetBreakpointByURL, debugger.SetBreakpointByURLParams{
		LineNumber: 5, URLRegex: regexp.QuoteMeta("file://" + script)})
	must(err)
	if len(bp.Locations) == 0 {
		tb.Fatal("bare: breakpoint not bound")
	}
	_, err = cdp.Call(ctx, conn, debugger.Resume, debugger.ResumeParams{})
	must(err)
	var ev debugger.EventPaused
	select {
	case ev = <-paused:
	case <-ctx.Done():
		tb.Fatal("bare: no pause at the breakpoint")
	}
	own := true
	props, err := cdp.Call(ctx, conn, cdpruntime.GetProperties, cdpruntime.GetPropertiesParams{
		ObjectID: ev.CallFrames[0].ScopeChain[0].Object.ObjectID, OwnProperties: &own})
	must(err)
	took := time.Since(began)
	if len(props.Result) < 3 {
		tb.Fatalf("bare: locals %+v", props.Result)
	}
	return took
}
