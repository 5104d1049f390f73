package bench

import (
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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testproc"
	"github.com/tetherdev/tether/internal/testwait"
)

// proc is a child process of a benchmark (testproc: a process group of its
// own, registered while it runs). Cleanup stops it (SIGTERM to its group,
// then SIGKILL after a grace) and waits for it; a non-zero exit after
// SIGTERM, or processes left in its group, fail the benchmark.
type proc struct {
	*testproc.Proc
	name string
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
	tp, err := testproc.Start(name, cmd, filepath.Join(childDir(tb, name), name+".log"))
	if err != nil {
		tb.Fatal(err)
	}
	p := &proc{Proc: tp, name: name}
	tb.Cleanup(func() { p.stop(tb) })
	return p
}

func (p *proc) pid() int { return p.Pid() }

func (p *proc) exited() bool { return p.Exited() }

// stop ends the process with SIGTERM to its group (SIGKILL after 20s),
// waits for it, and kills what is left in its group.
func (p *proc) stop(tb testing.TB) {
	if err := p.Stop(20 * time.Second); err != nil {
		tb.Errorf("%v\n%s", err, p.logTail())
	}
}

// discard forgets a process that exited while starting, as expected (it
// lost the race for its port): its exit is not reported at cleanup.
func (p *proc) discard() { p.Discard() }

// logTail returns the end of the process's output, for failure messages.
func (p *proc) logTail() string { return p.LogTail(4000) }

// memKB returns the process's resident set (VmRSS) and its peak (VmHWM).
func (p *proc) memKB() (rss, peak int64, err error) { return p.MemKB() }

// cpuTime returns the CPU time (user + system) pid has used so far.
func cpuTime(pid int) time.Duration { return testproc.CPUTime(pid) }

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
	tr := &http.Transport{Proxy: nil, DisableCompression: true, TLSClientConfig: benchClientTLS()}
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
	return startServerScheme(tb, "http", name, path, args, env)
}

// startServerScheme is startServer for a server speaking scheme (http, or
// https with the bench's certificate).
func startServerScheme(tb testing.TB, scheme, name, path string, args func(addr string) []string, env func(addr string) []string) *server {
	tb.Helper()
	client := controlClient(tb)
	p, addr := startListening(tb, name, path, args, env, func(addr string) bool {
		res, err := client.Get(scheme + "://" + addr + "/healthz")
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return &server{proc: p, url: scheme + "://" + addr}
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
		exited := false
		if !testwait.Within(15*time.Second, func() bool { exited = p.exited(); return exited || ready(addr) }) {
			tb.Fatalf("%s not ready within 15s\n%s", name, p.logTail())
		}
		if !exited {
			return p, addr
		}
		if attempt >= 3 {
			tb.Fatalf("%s exited while starting: %v\n%s", name, p.Err(), p.logTail())
		}
		p.discard()
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
	return startBrokerEnv(tb, bin, secret, nil, extra...)
}

// startBrokerEnv is startBrokerWithSecret with env added to the broker's
// environment.
func startBrokerEnv(tb testing.TB, bin string, secret []byte, env []string, extra ...string) *server {
	tb.Helper()
	scheme := "http"
	if slices.Contains(extra, "--tls-cert") {
		scheme = "https"
	}
	return startServerScheme(tb, scheme, "broker", bin, func(addr string) []string {
		return append([]string{"broker", "--listen", addr, "--secret", string(secret), "--log-level", "warn"}, extra...)
	}, func(string) []string { return env })
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
	tok := mintToken(tb, secret, auth.RoleBridge, ws)
	args := []string{"bridge", "--broker", brk.url, "--workspace", ws, "--token", tok, "--root", childDir(tb, "bridge-root"), "--log-level", "warn"}
	if strings.HasPrefix(brk.url, "https://") {
		caFile, _, _ := benchTLSFiles(tb)
		args = append(args, "--ca", caFile)
	}
	p := startProc(tb, "bridge", bin, args)
	caller := mintToken(tb, secret, auth.RoleCaller, auth.AnyWorkspace)
	client := controlClient(tb)
	var err error
	if !testwait.Within(15*time.Second, func() bool {
		if p.exited() {
			tb.Fatalf("bridge exited while connecting: %v\n%s", p.Err(), p.logTail())
		}
		var list map[string]bool
		list, err = listWorkspaces(client, brk.url, caller)
		return err == nil && list[ws]
	}) {
		tb.Fatalf("broker did not list workspace %q within 15s (last error: %v)\n%s\n%s", ws, err, p.logTail(), brk.logTail())
	}
	return p
}

func mintToken(tb testing.TB, secret []byte, role, ws string) string {
	tb.Helper()
	tok, err := auth.IssueToken(secret, role, []string{ws}, time.Hour)
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
