// Package e2e_test starts real processes: the built tether binary (brokers,
// bridges), the real socket.io-client from npm, and checks tether's promises
// from the outside.
package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/leakcheck"
	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

var tetherBin string

// TestMain builds the binary when TETHER_BIN is not set, runs the tests, and
// fails the run if they passed but left a goroutine, a file descriptor or a
// process they started (directly or not: a bridge's shell, an adapter's
// debuggee) behind (internal/leakcheck).
func TestMain(m *testing.M) {
	leaks := leakcheck.Begin()
	code := func() int {
		tetherBin = os.Getenv("TETHER_BIN")
		if tetherBin == "" {
			// Outside make: build the binary once for this run.
			dir, err := os.MkdirTemp("", "tether-e2e-bin")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			tetherBin = filepath.Join(dir, "tether")
			cmd := exec.Command("go", "build", "-o", tetherBin, "github.com/tetherdev/tether/cmd/tether")
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "building tether:", err)
				return 1
			}
		}
		// The run's own directory for the files of tether's local doors
		// (bridge listener tokens, generated broker secrets): every child
		// inherits it, and the person's own stays untouched.
		run, err := os.MkdirTemp("", "tether-e2e-run")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(run)
		os.Setenv("XDG_RUNTIME_DIR", run)
		return m.Run()
	}()
	os.Exit(leaks.After(code))
}

const secret = "e2e-secret-0123456789abcdef"

// exitCode runs cmd to its end and returns its exit status; a command that
// could not be run fails t. Its output goes where cmd sends it.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", strings.Join(cmd.Args, " "), err)
	}
	return 0
}

func token(t *testing.T, role string, ws ...string) string {
	t.Helper()
	tok, err := auth.IssueToken([]byte(secret), role, ws, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// proc is a child process whose stderr lines are kept and can be awaited.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	lines []string
	cond  chan struct{} // closed and replaced on every new line
}

func start(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{}), cond: make(chan struct{})}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{Setpgid: true}, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.cond)
			p.cond = make(chan struct{})
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGTERM, 10*time.Second)
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s stderr (last lines):\n%s", name, strings.Join(tail(p.lines, 30), "\n"))
			p.mu.Unlock()
		}
	})
	return p
}

func tail(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stop signals the process group and waits; SIGKILL after the grace.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.t.Errorf("%s did not exit %s after %s; killing", p.name, grace, sig)
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// pause stops the process with SIGSTOP and returns once every one of its
// threads is stopped: kill(2) only marks the signal pending, and a thread
// busy on another core may still answer a request sent right after it. The
// returned func resumes the process.
func (p *proc) pause() (resume func()) {
	p.t.Helper()
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		p.t.Fatalf("stopping %s: %v", p.name, err)
	}
	resume = func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	// Polling /proc: the kernel sends no event for a stop we can await
	// without reaping.
	if !testwait.Within(5*time.Second, func() bool { return allThreadsStopped(pid) }) {
		resume()
		p.t.Fatalf("%s: not every thread stopped 5s after SIGSTOP", p.name)
	}
	return resume
}

// allThreadsStopped reports whether every thread of pid is in state T.
func allThreadsStopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false
		}
	}
	return true
}

// waitLine waits for a stderr line containing all of parts and returns it.
func (p *proc) waitLine(within time.Duration, parts ...string) string {
	p.t.Helper()
	deadline := time.After(within)
	seen := 0
	for {
		p.mu.Lock()
		lines, cond := p.lines, p.cond
		p.mu.Unlock()
		for ; seen < len(lines); seen++ {
			ok := true
			for _, part := range parts {
				ok = ok && strings.Contains(lines[seen], part)
			}
			if ok {
				return lines[seen]
			}
		}
		select {
		case <-cond:
		case <-p.done:
			p.t.Fatalf("%s exited before logging %q", p.name, parts)
		case <-deadline:
			p.t.Fatalf("%s did not log %q within %s", p.name, parts, within)
		}
	}
}

type brokerProc struct {
	*proc
	url      string
	instance string // its instance id, from its "broker listening" line
	// client makes the harness's requests (http.DefaultClient when nil;
	// a client trusting the test CA for a broker over TLS).
	client *http.Client
}

func (b *brokerProc) httpClient() *http.Client {
	if b.client != nil {
		return b.client
	}
	return http.DefaultClient
}

// startBroker runs `tether broker` on a free loopback port.
func startBroker(t *testing.T, extra ...string) *brokerProc {
	t.Helper()
	return startBrokerOn(t, "127.0.0.1:0", extra...)
}

func startBrokerOn(t *testing.T, addr string, extra ...string) *brokerProc {
	t.Helper()
	return runBroker(t, "broker", addr, nil, extra...)
}

// runBroker runs `tether broker` named name on addr, with env added to its
// environment, and waits until it listens.
func runBroker(t *testing.T, name, addr string, env []string, extra ...string) *brokerProc {
	t.Helper()
	args := append([]string{"broker", "--listen", addr, "--secret", secret, "--log-level", "debug"}, extra...)
	cmd := exec.Command(tetherBin, args...)
	if env != nil {
		cmd.Env = append(cmd.Environ(), env...)
	}
	p := start(t, name, cmd)
	line := p.waitLine(20*time.Second, "broker listening")
	var ev struct {
		Listen   string `json:"listen"`
		Instance string `json:"instance"`
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Listen == "" {
		t.Fatalf("cannot read the listen address from %q", line)
	}
	return &brokerProc{proc: p, url: "http://" + ev.Listen, instance: ev.Instance}
}

// startBridge runs `tether bridge` for ws and waits until the broker lists it.
func startBridge(t *testing.T, b *brokerProc, ws string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"bridge", "--broker", b.url, "--workspace", ws, "--token", token(t, auth.RoleBridge, ws), "--root", t.TempDir(), "--log-level", "debug"}, extra...)
	p := start(t, "bridge "+ws, exec.Command(tetherBin, args...))
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "%s holding %s", b.name, ws)
	return p
}

// holds reports whether the broker lists ws as held by itself (every
// instance on the bus answers a list: only this broker's own entry counts).
func (b *brokerProc) holds(ws string) bool {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.url+"/api/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+token(b.t, auth.RoleCaller, "*"))
	res, err := b.httpClient().Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	var list struct {
		Workspaces []protocol.Workspace `json:"workspaces"`
	}
	_ = json.NewDecoder(res.Body).Decode(&list)
	for _, w := range list.Workspaces {
		if w.WorkspaceID == ws && (b.instance == "" || w.Instance == b.instance) {
			return true
		}
	}
	return false
}

type callResult struct {
	status  int
	resp    protocol.ToolResponse
	elapsed time.Duration
	err     error
}

// call posts one call to the broker's HTTP API.
func (b *brokerProc) call(ws, tok, body string) callResult {
	return b.callWith(ws, tok, body, nil)
}

// callWith posts one call to the broker's HTTP API with extra headers.
func (b *brokerProc) callWith(ws, tok, body string, header map[string]string) callResult {
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, b.url+"/api/v1/workspaces/"+ws+"/calls", strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := b.httpClient().Do(req)
	if err != nil {
		return callResult{err: err, elapsed: time.Since(start)}
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := callResult{status: res.StatusCode, elapsed: time.Since(start)}
	if err := json.Unmarshal(raw, &r.resp); err != nil {
		r.err = fmt.Errorf("response %q: %w", raw, err)
	}
	return r
}

func (b *brokerProc) goCall(ws, tok, body string) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() { ch <- b.call(ws, tok, body) }()
	return ch
}

func await(t *testing.T, ch <-chan callResult, within time.Duration) callResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("call failed: %v", r.err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("call not answered within %s", within)
		return callResult{}
	}
}

// ideClient is the real socket.io-client (npm) playing an IDE extension,
// driven through e2e/clients/ide_client.js.
type ideClient struct {
	t      *testing.T
	proc   *exec.Cmd
	stdin  io.WriteCloser
	events chan map[string]any
	// overflow counts events dropped because events was full; await and
	// next fail if the event they wait for could be among them.
	overflow atomic.Int64
	done     chan struct{}
}

func clientsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TETHER_E2E_CLIENTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "clients")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "socket.io-client")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("socket.io-client is not installed in %s (make deps runs npm ci)", dir)
		}
		t.Skipf("socket.io-client is not installed in %s; run make deps", dir)
	}
	return dir
}

// startIDE connects a socket.io-client for ws in mode (ack, event, both,
// none, empty-ack-then-event, alternate) and waits for its first event
// (connected or connect_error), which it returns.
func startIDE(t *testing.T, b *brokerProc, ws, tok, mode string, extra ...string) (*ideClient, map[string]any) {
	t.Helper()
	args := append([]string{"ide_client.js", "--url", b.url, "--token", tok, "--workspace", ws, "--mode", mode}, extra...)
	cmd, stdin, stdout := startNode(t, clientsDir(t), args...)
	c := &ideClient{t: t, proc: cmd, stdin: stdin, events: make(chan map[string]any, 4096), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				select {
				case c.events <- ev:
				default:
					// Nobody reads (a flooding test); never block the
					// reader, or the client's exit could not be seen.
					c.overflow.Add(1)
				}
			}
		}
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.kill)
	first := c.next(10 * time.Second)
	return c, first
}

// startNode starts node with args in dir (one of e2e/clients' scripts),
// talking over its stdin and stdout; its stderr is this process's. It is
// killed if this process dies.
func startNode(t *testing.T, dir string, args ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{}, syscall.SIGKILL)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting node: %v", err)
	}
	return cmd, stdin, stdout
}

// writeFiles writes files (name → content) under dir, making directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *ideClient) kill() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(3 * time.Second):
		_ = c.proc.Process.Kill()
		<-c.done
	}
}

func (c *ideClient) next(within time.Duration) map[string]any {
	c.t.Helper()
	select {
	case ev := <-c.events:
		return ev
	case <-time.After(within):
		c.t.Fatalf("socket.io-client reported nothing within %s (%d events dropped unread)", within, c.overflow.Load())
		return nil
	}
}

// await returns the next event named name, skipping others.
func (c *ideClient) await(name string, within time.Duration) map[string]any {
	c.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-c.events:
			if ev["event"] == name {
				return ev
			}
		case <-deadline:
			c.t.Fatalf("socket.io-client did not report %q within %s (%d events dropped unread)", name, within, c.overflow.Load())
			return nil
		}
	}
}

func (c *ideClient) send(cmd any) {
	c.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("writing to node: %v", err)
	}
}

// connectIDE starts a client that must connect.
func connectIDE(t *testing.T, b *brokerProc, ws, mode string) *ideClient {
	t.Helper()
	c, first := startIDE(t, b, ws, token(t, auth.RoleBridge, ws), mode)
	if first["event"] != "connected" {
		t.Fatalf("socket.io-client did not connect: %v", first)
	}
	return c
}
