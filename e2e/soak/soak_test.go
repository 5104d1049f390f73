package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/leakcheck"
	"github.com/tetherdev/tether/internal/testproc"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// TestMain stops every process the soak started on Ctrl-C, and fails the
// run if it passed but left a goroutine, a descriptor or a process behind.
func TestMain(m *testing.M) {
	leaks := leakcheck.Begin()
	remove := testproc.OnInterrupt("soak", nil)
	code := m.Run()
	remove()
	os.Exit(leaks.After(code))
}

// The margins within which the broker must come back to its baseline once
// every connection is gone, and how long it may take.
//
// The heap's margin grows with the connections held at the peak: the Go
// runtime keeps every goroutine descriptor it made for reuse (runtime.malg
// in a heap profile), and a map keeps the buckets it grew to. That is kept
// once, not per connection ever made: in process, a broker's heap in use
// after 2,000 bridges had come and gone was 7.2 MB over its start, and the
// same after a second 2,000; after the full soak's 11,000 it was 31 MB
// over (2.9 KB a connection). Goroutines and descriptors have no such
// allowance: they must all go.
const (
	goroutineMargin = 20
	fdMargin        = 10
	heapMargin      = 16 << 20
	heapPerConn     = 4 << 10
	returnWait      = 3 * time.Minute
)

// heapAllowed is the heap in use over the baseline allowed once peak
// connections have come and gone.
func heapAllowed(peak int) int64 { return heapMargin + int64(peak)*heapPerConn }

// clientsPerNode is how many socket.io connections one node process holds.
const clientsPerNode = 5000

type soakConfig struct {
	conns, bridges, bridgeProcs, rate int
	duration, pingInterval, sample    time.Duration
}

func loadSoakConfig(t *testing.T) soakConfig {
	c := soakConfig{conns: 10000, bridges: 1000, bridgeProcs: 100, rate: 20,
		duration: 5 * time.Minute, pingInterval: 5 * time.Second, sample: 30 * time.Second}
	num := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a non-negative integer", name, v)
			}
			*dst = n
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a positive duration", name, v)
			}
			*dst = d
		}
	}
	num("SOAK_CONNS", &c.conns)
	num("SOAK_BRIDGES", &c.bridges)
	num("SOAK_BRIDGE_PROCS", &c.bridgeProcs)
	num("SOAK_RATE", &c.rate)
	dur("SOAK_DURATION", &c.duration)
	dur("SOAK_PING_INTERVAL", &c.pingInterval)
	dur("SOAK_SAMPLE", &c.sample)
	c.bridgeProcs = min(c.bridgeProcs, c.bridges)
	return c
}

// sample is the broker as seen at one moment.
type sample struct {
	at         time.Duration // since the first connection
	conns      int           // workspaces it lists
	rssKB      int64
	goroutines int
	fds        int
	heap       int64 // bytes in use
}

func TestSoak(t *testing.T) {
	if os.Getenv("TETHER_SOAK") != "1" {
		t.Skip("TETHER_SOAK is not 1: make soak runs it")
	}
	cfg := loadSoakConfig(t)
	bin := testproc.TetherBin(t)
	clients := testproc.NodeClients(t)
	limit, err := testproc.RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	if need := uint64(cfg.conns + cfg.bridges + 500); limit < need {
		t.Skipf("RLIMIT_NOFILE is %d; the soak needs %d descriptors: raise ulimit -n or lower SOAK_CONNS", limit, need)
	}
	dir := t.TempDir()
	s := &soak{t: t, cfg: cfg, dir: dir, secret: fmt.Sprintf("soak-secret-%d", time.Now().UnixNano())}
	s.control = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(s.control.CloseIdleConnections)
	s.startBroker(bin)

	// The baseline is taken once the fresh broker's start-up has settled;
	// nothing signals that, so time passes (the soak measures from here).
	time.Sleep(2 * time.Second)
	base := s.sample(0)
	t.Logf("soak: %d socket.io connections (%d per node process), %d bridges (%d tether bridge processes, %d in this process), ping interval %s, %d calls/s for %s",
		cfg.conns, clientsPerNode, cfg.bridges, cfg.bridgeProcs, cfg.bridges-cfg.bridgeProcs, cfg.pingInterval, cfg.rate, cfg.duration)

	start := time.Now()
	s.connect(bin, clients)
	want := cfg.conns + cfg.bridges
	s.waitListed(want, 5*time.Minute)
	connected := time.Since(start)
	t.Logf("all %d connected in %s", want, connected.Round(time.Millisecond))

	samples := []sample{s.sample(time.Since(start))}
	stopCalls := make(chan struct{})
	var calls sync.WaitGroup
	calls.Go(func() { s.trickle(stopCalls) })
	end := time.Now().Add(cfg.duration)
	for time.Now().Before(end) {
		time.Sleep(min(cfg.sample, time.Until(end))) // the soak's duration, sampled every cfg.sample: time is the subject
		smp := s.sample(time.Since(start))
		samples = append(samples, smp)
		if smp.conns != want {
			t.Errorf("at %s the broker lists %d workspaces, want %d: connections were lost", smp.at.Round(time.Second), smp.conns, want)
		}
	}
	close(stopCalls)
	calls.Wait()
	s.disconnect()
	s.waitListed(0, 2*time.Minute)
	back, took := s.waitBaseline(base, heapAllowed(want))

	var out bytes.Buffer
	fmt.Fprintf(&out, "soak: %d socket.io connections, %d bridges (%d processes), ping interval %s, held %s, %d calls (%d failed), %d unexpected disconnects\n",
		cfg.conns, cfg.bridges, cfg.bridgeProcs, cfg.pingInterval, cfg.duration, s.sent.Load(), s.failed.Load(), s.disconnects.Load())
	fmt.Fprintf(&out, "  %-8s %8s %10s %11s %8s %10s %12s %12s\n", "at", "conns", "RSS MB", "goroutines", "fds", "heap MB", "KB/conn RSS", "gor./conn")
	row := func(name string, x sample) {
		perKB, perG := 0.0, 0.0
		if x.conns > 0 {
			perKB = float64(x.rssKB-base.rssKB) / float64(x.conns)
			perG = float64(x.goroutines-base.goroutines) / float64(x.conns)
		}
		fmt.Fprintf(&out, "  %-8s %8d %10.1f %11d %8d %10.1f %12.1f %12.3f\n", name, x.conns, float64(x.rssKB)/1024, x.goroutines, x.fds, float64(x.heap)/(1<<20), perKB, perG)
	}
	row("before", base)
	for _, x := range samples {
		row(x.at.Round(time.Second).String(), x)
	}
	row("after", back)
	fmt.Fprintf(&out, "  back to baseline %s after the last disconnect (margins: %d goroutines, %d fds, %.1f MB heap; RSS %+.1f MB)\n",
		took.Round(time.Second), goroutineMargin, fdMargin, float64(heapAllowed(want))/(1<<20), float64(back.rssKB-base.rssKB)/1024)
	t.Log("\n" + out.String())
	fmt.Println(out.String())
	if n := s.failed.Load(); n > 0 {
		t.Errorf("%d of %d calls failed (first: %s)", n, s.sent.Load(), s.firstFailure.Load())
	}
	if n := s.disconnects.Load(); n > 0 {
		t.Errorf("%d connections were disconnected during the soak", n)
	}
	if back.goroutines > base.goroutines+goroutineMargin || back.fds > base.fds+fdMargin || back.heap > base.heap+heapAllowed(want) {
		t.Errorf("the broker did not come back to its baseline within %s: %+v, baseline %+v", returnWait, back, base)
	}
}

// soak is one soak run's broker and connections.
type soak struct {
	t       *testing.T
	cfg     soakConfig
	dir     string
	secret  string
	broker  *testproc.Proc
	url     string
	control *http.Client
	caller  string

	nodes     []*echoNode
	procs     []*testproc.Proc
	inproc    []*bridge.Bridge
	inprocRun sync.WaitGroup
	cancel    context.CancelFunc
	bridgeTr  *http.Transport

	workspaces []string // every workspace id, for the trickle

	sent, failed atomic.Int64
	firstFailure atomic.Value
	disconnects  atomic.Int64
}

func (s *soak) token(role, ws string) string {
	tok, err := auth.IssueToken([]byte(s.secret), role, []string{ws}, 24*time.Hour)
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

func (s *soak) startBroker(bin string) {
	t := s.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := s.cfg.pingInterval.String()
	cmd := exec.Command(bin, "broker", "--listen", addr, "--secret", s.secret, "--log-level", "warn",
		"--ping-interval", p, "--ping-timeout", p)
	s.broker, err = testproc.Start("broker", cmd, filepath.Join(s.dir, "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.broker.Stop(30 * time.Second); err != nil {
			t.Errorf("%v\n%s", err, s.broker.LogTail(3000))
		}
	})
	s.url = "http://" + addr
	s.caller = s.token(auth.RoleCaller, auth.AnyWorkspace)
	healthy := false
	testwait.Within(20*time.Second, func() bool {
		if res, err := s.control.Get(s.url + "/healthz"); err == nil {
			res.Body.Close()
			healthy = res.StatusCode == http.StatusOK
		}
		return healthy || s.broker.Exited()
	})
	if !healthy {
		t.Fatalf("the broker did not start\n%s", s.broker.LogTail(3000))
	}
}

// connect starts the socket.io connections (node processes of
// clientsPerNode each) and the bridges.
func (s *soak) connect(bin, clientsDir string) {
	t := s.t
	for first := 0; first < s.cfg.conns; first += clientsPerNode {
		n := min(clientsPerNode, s.cfg.conns-first)
		var conns []map[string]string
		for i := first; i < first+n; i++ {
			ws := fmt.Sprintf("idle-%05d", i)
			s.workspaces = append(s.workspaces, ws)
			conns = append(conns, map[string]string{"url": s.url, "workspace": ws, "token": s.token(auth.RoleBridge, ws)})
		}
		s.nodes = append(s.nodes, s.startEchoNode(clientsDir, fmt.Sprintf("clients-%d", first/clientsPerNode), conns))
	}
	for _, n := range s.nodes {
		n.waitReady(t, 5*time.Minute)
	}
	root := filepath.Join(s.dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range s.cfg.bridgeProcs {
		ws := fmt.Sprintf("bridge-%04d", i)
		s.workspaces = append(s.workspaces, ws)
		cmd := exec.Command(bin, "bridge", "--broker", s.url, "--workspace", ws, "--token", s.token(auth.RoleBridge, ws), "--root", root, "--log-level", "warn")
		p, err := testproc.Start("bridge "+ws, cmd, filepath.Join(s.dir, "bridges.log"))
		if err != nil {
			t.Fatal(err)
		}
		s.procs = append(s.procs, p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.bridgeTr = &http.Transport{Proxy: nil}
	logf, err := os.Create(filepath.Join(s.dir, "inproc-bridges.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	log := zerolog.New(logf).Level(zerolog.WarnLevel)
	for i := s.cfg.bridgeProcs; i < s.cfg.bridges; i++ {
		ws := fmt.Sprintf("bridge-%04d", i)
		s.workspaces = append(s.workspaces, ws)
		b, err := bridge.New(bridge.Config{BrokerURL: s.url, WorkspaceID: ws, Token: s.token(auth.RoleBridge, ws), Root: root,
			Logger: log, HTTPClient: &http.Client{Transport: s.bridgeTr}})
		if err != nil {
			t.Fatal(err)
		}
		s.inproc = append(s.inproc, b)
		s.inprocRun.Go(func() {
			if err := b.Run(ctx); err != nil {
				t.Errorf("in-process bridge %s: %v", ws, err)
			}
		})
	}
	t.Cleanup(s.disconnect) // also when the test fails before disconnecting
}

// disconnect ends every connection: the node processes leave, the bridge
// processes get SIGTERM, the in-process bridges' Run returns. Idempotent.
func (s *soak) disconnect() {
	var wg sync.WaitGroup
	for _, n := range s.nodes {
		wg.Go(func() { n.stop(s.t) })
	}
	for _, p := range s.procs {
		wg.Go(func() {
			if err := p.Stop(15 * time.Second); err != nil {
				s.t.Error(err)
			}
		})
	}
	if s.cancel != nil {
		s.cancel()
	}
	wg.Wait()
	s.inprocRun.Wait()
	if s.bridgeTr != nil {
		s.bridgeTr.CloseIdleConnections()
	}
	s.nodes, s.procs = nil, nil
}

// listed returns how many workspaces the broker lists.
func (s *soak) listed() (int, error) {
	req, _ := http.NewRequest(http.MethodGet, s.url+"/api/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+s.caller)
	res, err := s.control.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var list struct {
		Workspaces []json.RawMessage `json:"workspaces"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		return 0, err
	}
	return len(list.Workspaces), nil
}

func (s *soak) waitListed(n int, within time.Duration) {
	deadline := time.Now().Add(within)
	for {
		got, err := s.listed()
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the broker lists %d workspaces (%v), want %d, after %s", got, err, n, within)
		}
		// Every 200 ms, not testwait's 5: a look lists up to every
		// connection of the soak, from the broker whose connect time and
		// memory it measures.
		time.Sleep(200 * time.Millisecond)
	}
}

// sample reads the broker's figures: RSS and descriptors from /proc,
// goroutines and heap from its /metrics.
func (s *soak) sample(at time.Duration) sample {
	x := sample{at: at}
	var err error
	if x.rssKB, _, err = s.broker.MemKB(); err != nil {
		s.t.Fatal(err)
	}
	if x.fds, err = testproc.FDs(s.broker.Pid()); err != nil {
		s.t.Fatal(err)
	}
	res, err := s.control.Get(s.url + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "go_goroutines":
			x.goroutines = int(f)
		case "go_memstats_heap_inuse_bytes":
			x.heap = int64(f)
		}
	}
	x.conns, _ = s.listed()
	return x
}

// waitBaseline waits until the broker's goroutines, descriptors and heap
// are within their margins of base (heap within heap bytes), and returns
// the figures then and how long it took (the last figures after
// returnWait, if they never were).
func (s *soak) waitBaseline(base sample, heap int64) (sample, time.Duration) {
	start := time.Now()
	for {
		x := s.sample(0)
		if (x.goroutines <= base.goroutines+goroutineMargin && x.fds <= base.fds+fdMargin && x.heap <= base.heap+heap) ||
			time.Since(start) > returnWait {
			return x, time.Since(start)
		}
		time.Sleep(time.Second) // a sample a second: each scrapes the measured broker, and how long it took is reported
	}
}

// trickle sends cfg.rate calls a second to random workspaces until stop;
// every call must succeed with its own echo.
func (s *soak) trickle(stop <-chan struct{}) {
	if s.cfg.rate == 0 {
		<-stop
		return
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	h := &caller.HTTP{BaseURL: s.url, Token: s.caller, Client: &http.Client{Transport: tr}}
	tick := time.NewTicker(time.Second / time.Duration(s.cfg.rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ws := s.workspaces[rand.IntN(len(s.workspaces))]
		payload := fmt.Appendf(nil, `{"nonce":"%d-%d"}`, seq, rand.Int64())
		wg.Go(func() {
			s.sent.Add(1)
			resp := h.Call(context.Background(), caller.Request{WorkspaceID: ws, Endpoint: protocol.PingEndpoint, Payload: payload, Timeout: 10 * time.Second})
			if !resp.Success || !bytes.Equal(bytes.TrimSpace(resp.Result), payload) {
				s.failed.Add(1)
				s.firstFailure.CompareAndSwap(nil, fmt.Sprintf("%s: %s %s %.200s", ws, resp.Error, resp.Message, resp.Result))
			}
		})
	}
}

// echoNode is one echo_clients.js process holding many connections.
type echoNode struct {
	proc  *testproc.Proc
	stdin io.WriteCloser
	ready chan string // the first "ready" or "failed" line
	read  sync.WaitGroup
}

func (s *soak) startEchoNode(clientsDir, name string, conns []map[string]string) *echoNode {
	t := s.t
	config, _ := json.Marshal(map[string]any{"conns": conns, "parallel": 100})
	path := filepath.Join(s.dir, name+".json")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(clientsDir, "echo_clients.js"), "--config", path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := testproc.Start(name, cmd, filepath.Join(s.dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	n := &echoNode{proc: p, stdin: stdin, ready: make(chan string, 1)}
	n.read.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev struct{ Event string }
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch ev.Event {
			case "ready", "failed":
				select {
				case n.ready <- sc.Text():
				default:
				}
			case "disconnect":
				s.disconnects.Add(1)
			}
		}
	})
	return n
}

func (n *echoNode) waitReady(t *testing.T, within time.Duration) {
	select {
	case line := <-n.ready:
		if !strings.Contains(line, `"ready"`) {
			t.Fatalf("%s: %s", n.proc.Name, line)
		}
	case <-n.proc.Done():
		t.Fatalf("%s exited while connecting\n%s", n.proc.Name, n.proc.LogTail(3000))
	case <-time.After(within):
		t.Fatalf("%s: not every connection up within %s\n%s", n.proc.Name, within, n.proc.LogTail(3000))
	}
}

// stop closes the node's stdin (it disconnects every socket and exits)
// and waits for it.
func (n *echoNode) stop(t *testing.T) {
	_ = n.stdin.Close()
	select {
	case <-n.proc.Done():
		n.proc.Discard()
	case <-time.After(30 * time.Second):
		if err := n.proc.Stop(5 * time.Second); err != nil {
			t.Error(err)
		}
	}
	n.read.Wait()
}
