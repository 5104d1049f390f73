package bench

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
)

// proc is a child process of a benchmark, in a process group of its own
// (children_test.go). Cleanup stops it (SIGTERM to its group, then SIGKILL
// after a grace) and waits for it; a non-zero exit after SIGTERM, or
// processes left in its group, fail the benchmark.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string

	done    chan struct{} // closed once Wait returned
	waitErr error
	once    sync.Once
}

// startProc starts path with args, its output going to a log file in a
// temporary directory.
func startProc(tb testing.TB, name, path string, args []string, env ...string) *proc {
	tb.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	return startCmd(tb, name, cmd)
}

// startCmd starts cmd as a benchmark child. Its stdout and stderr, unless
// already set, go to a log file in a directory of its own (childDir).
func startCmd(tb testing.TB, name string, cmd *exec.Cmd) *proc {
	tb.Helper()
	logPath := filepath.Join(childDir(tb, name), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		tb.Fatalf("creating %s log: %v", name, err)
	}
	defer f.Close() // the child holds its own descriptor
	if cmd.Stdout == nil {
		cmd.Stdout = f
	}
	if cmd.Stderr == nil {
		cmd.Stderr = f
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	if err := startChild(cmd, p); err != nil {
		tb.Fatal(err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() { p.stop(tb) })
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process with SIGTERM to its group (SIGKILL after 20s),
// waits for it, and kills what is left in its group.
func (p *proc) stop(tb testing.TB) {
	p.once.Do(func() {
		defer forgetChild(p)
		if p.exited() {
			tb.Errorf("%s exited on its own: %v\n%s", p.name, p.waitErr, p.logTail())
			_ = p.reapGroup()
			return
		}
		p.signalGroup(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.waitErr != nil {
				tb.Errorf("%s exited badly after SIGTERM: %v\n%s", p.name, p.waitErr, p.logTail())
			}
		case <-time.After(20 * time.Second):
			p.signalGroup(syscall.SIGKILL)
			<-p.done
			tb.Errorf("%s did not exit within 20s of SIGTERM; killed\n%s", p.name, p.logTail())
		}
		if left := p.reapGroup(); left != "" {
			tb.Errorf("%s left processes in its group after exiting: %s (killed)", p.name, left)
		}
	})
}

// discard forgets a process that exited while starting, as expected (it
// lost the race for its port): its exit is not reported at cleanup.
func (p *proc) discard() {
	p.once.Do(func() {
		_ = p.reapGroup()
		forgetChild(p)
	})
}

// logTail returns the end of the process's output, for failure messages.
func (p *proc) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return fmt.Sprintf("--- %s output (tail) ---\n%s", p.name, data)
}

// memKB returns the process's resident set (VmRSS) and its peak (VmHWM).
func (p *proc) memKB() (rss, peak int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s memory: %w", p.name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parsing %s %s %q: %w", p.name, k, v, err)
		}
		if k == "VmRSS" {
			rss = n
		} else {
			peak = n
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("no VmRSS for %s", p.name)
	}
	return rss, peak, sc.Err()
}

// cpuTime returns the CPU time (user + system) pid has used so far.
func cpuTime(pid int) time.Duration {
	_, f, ok := procStat(pid)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	// USER_HZ is 100 on every Linux architecture Go supports.
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// procStat reads /proc/pid/stat: the command name, and the fields after it
// (fields[0] is the state, the third field of proc(5)).
func procStat(pid int) (comm string, fields []string, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, false
	}
	// The command name in parentheses may hold spaces; fields follow it.
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	return string(data[open+1 : end]), strings.Fields(string(data[end+1:])), true
}

// freeAddr returns a loopback address with a port that was free a moment
// ago. Starters retry if a process loses the race for it.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("finding a free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// controlClient is for setup and checks, not for load. Its connections are
// closed in Cleanup, so no transport goroutine outlives the benchmark.
func controlClient(tb testing.TB) *http.Client {
	tr := &http.Transport{Proxy: nil, DisableCompression: true}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// server is a process serving HTTP on addr.
type server struct {
	*proc
	url string
}

// startServer starts a process that listens on the address it is given by
// args(addr) and waits until GET /healthz answers 200 (startListening).
func startServer(tb testing.TB, name, path string, args func(addr string) []string, env func(addr string) []string) *server {
	tb.Helper()
	client := controlClient(tb)
	p, addr := startListening(tb, name, path, args, env, func(addr string) bool {
		res, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return &server{proc: p, url: "http://" + addr}
}

// startListening starts a process that listens on the loopback address it
// is given by args(addr) and waits (up to 15s) until ready(addr). It
// retries with another port when the process exits early (the port was
// taken meanwhile).
func startListening(tb testing.TB, name, path string, args, env func(addr string) []string, ready func(addr string) bool) (*proc, string) {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		addr := freeAddr(tb)
		p := startProc(tb, name, path, args(addr), env(addr)...)
		deadline := time.Now().Add(15 * time.Second)
		for {
			if p.exited() {
				if attempt < 3 {
					p.discard()
					break
				}
				tb.Fatalf("%s exited while starting: %v\n%s", name, p.waitErr, p.logTail())
			}
			if ready(addr) {
				return p, addr
			}
			if time.Now().After(deadline) {
				tb.Fatalf("%s not ready within 15s\n%s", name, p.logTail())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// tetherBin returns $TETHER_BIN or skips.
func tetherBin(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("TETHER_BIN")
	if bin == "" {
		tb.Skip("TETHER_BIN is not set: build the binary (go build -o bin/tether ./cmd/tether) and set TETHER_BIN to its absolute path, or run `make bench-e2e`")
	}
	if _, err := os.Stat(bin); err != nil {
		tb.Fatalf("TETHER_BIN: %v", err)
	}
	return bin
}

// startBroker starts `tether broker` with a fresh secret, logging at warn.
func startBroker(tb testing.TB, bin string, extra ...string) (*server, []byte) {
	tb.Helper()
	secret := newSecret()
	return startBrokerWithSecret(tb, bin, secret, extra...), secret
}

// newSecret returns a fresh token signing secret.
func newSecret() []byte {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	return []byte(hex.EncodeToString(raw[:]))
}

// startBrokerWithSecret starts `tether broker` signing with secret (brokers
// that share a Redis share it), logging at warn.
func startBrokerWithSecret(tb testing.TB, bin string, secret []byte, extra ...string) *server {
	tb.Helper()
	return startServer(tb, "broker", bin, func(addr string) []string {
		return append([]string{"broker", "--listen", addr, "--secret", string(secret), "--log-level", "warn"}, extra...)
	}, func(string) []string { return nil })
}

// startEcho starts the baseline server: this test binary in echo mode.
func startEcho(tb testing.TB) *server {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatalf("finding the test binary: %v", err)
	}
	return startServer(tb, "echo", self, func(string) []string {
		return []string{"-test.run=^$"}
	}, func(addr string) []string { return []string{echoAddrEnv + "=" + addr} })
}

// startBridge starts `tether bridge` for workspace ws and waits until the
// broker lists it.
func startBridge(tb testing.TB, bin string, brk *server, secret []byte, ws string) *proc {
	tb.Helper()
	tok := mintToken(tb, secret, broker.RoleBridge, ws)
	p := startProc(tb, "bridge", bin, []string{"bridge", "--broker", brk.url, "--workspace", ws,
		"--token", tok, "--root", childDir(tb, "bridge-root"), "--log-level", "warn"})
	caller := mintToken(tb, secret, broker.RoleCaller, broker.AnyWorkspace)
	client := controlClient(tb)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if p.exited() {
			tb.Fatalf("bridge exited while connecting: %v\n%s", p.waitErr, p.logTail())
		}
		list, err := listWorkspaces(client, brk.url, caller)
		if err == nil && list[ws] {
			return p
		}
		if time.Now().After(deadline) {
			tb.Fatalf("broker did not list workspace %q within 15s (last error: %v)\n%s\n%s", ws, err, p.logTail(), brk.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mintToken(tb testing.TB, secret []byte, role, ws string) string {
	tb.Helper()
	tok, err := broker.IssueToken(secret, role, []string{ws}, time.Hour)
	if err != nil {
		tb.Fatalf("minting %s token: %v", role, err)
	}
	return tok
}

// listWorkspaces returns the workspaces the broker lists.
func listWorkspaces(client *http.Client, brokerURL, callerToken string) (map[string]bool, error) {
	req, err := http.NewRequest(http.MethodGet, brokerURL+"/api/v1/workspaces", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+callerToken)
	res, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("listing workspaces: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("listing workspaces: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("listing workspaces: HTTP %d: %.200s", res.StatusCode, body)
	}
	var out struct {
		Workspaces []struct {
			WorkspaceID string `json:"workspace_id"`
		} `json:"workspaces"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("decoding workspace list: %w", err)
	}
	m := make(map[string]bool, len(out.Workspaces))
	for _, w := range out.Workspaces {
		m[w.WorkspaceID] = true
	}
	return m, nil
}
