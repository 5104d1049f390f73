package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/internal/tuning"
)

// The systems and topologies of BenchmarkPeers.
const (
	sysTether = "tether"        // tether broker, socket.io-client echo connections
	sysBridge = "tether-bridge" // tether broker, tether bridges as the clients
	sysNode   = "node"          // node socket.io (+ @socket.io/redis-adapter)
	sysPython = "python"        // python-socketio on aiohttp (+ AsyncRedisManager)

	topoSingle = "single" // one instance, no Redis
	topoTwo    = "two"    // two instances on one Redis
	// topoTLS ("tls", peers_tls_test.go): one instance over HTTPS and WSS
)

// systemLabels name the systems in reports.
var systemLabels = map[string]string{
	sysTether: "tether",
	sysBridge: "tether, bridge clients",
	sysNode:   "node socket.io",
	sysPython: "python-socketio",
}

// systemPython is the interpreter the Debian packages python3-socketio,
// python3-aiohttp and python3-redis install for (a python3 earlier on PATH
// may be another one).
const systemPython = "/usr/bin/python3"

// peersEnvironment is what BenchmarkPeers runs with: the programs, the
// shared Redis, the token secret.
type peersEnvironment struct {
	cfg        peersConfig
	tether     string // $TETHER_BIN
	node       string
	clientsDir string // e2e/clients: echo_clients.js and socket.io-client
	peersDir   string // e2e/bench/peers: the peer servers and their node_modules
	secret     []byte
	redis      *redisServer // nil without the two-instance topology
}

func newPeersEnv(b *testing.B, cfg peersConfig) *peersEnvironment {
	b.Helper()
	e := &peersEnvironment{cfg: cfg, tether: tetherBin(b), secret: newSecret()}
	var err error
	if e.node, err = exec.LookPath("node"); err != nil {
		b.Fatalf("node is needed for the echo client: %v", err)
	}
	e.clientsDir = os.Getenv("TETHER_E2E_CLIENTS")
	if e.clientsDir == "" {
		e.clientsDir = filepath.Join("..", "clients")
	}
	if _, err := os.Stat(filepath.Join(e.clientsDir, "node_modules", "socket.io-client")); err != nil {
		b.Fatalf("socket.io-client is not installed in %s (make deps-node): %v", e.clientsDir, err)
	}
	if e.peersDir, err = filepath.Abs("peers"); err != nil {
		b.Fatal(err)
	}
	for _, sys := range cfg.systems {
		switch sys {
		case sysNode:
			if _, err := os.Stat(filepath.Join(e.peersDir, "node_modules", "socket.io")); err != nil {
				b.Fatalf("the node peer's packages are not installed in %s (make deps-peers): %v", e.peersDir, err)
			}
		case sysPython:
			out, err := exec.Command(systemPython, "-c", "import socketio, aiohttp, redis").CombinedOutput()
			if err != nil {
				b.Fatalf("the python peer needs python3-socketio, python3-aiohttp and python3-redis (make deps-apt): %v\n%s", err, out)
			}
		}
	}
	if slices.Contains(cfg.topologies, topoTwo) {
		e.redis = startRedis(b)
	}
	return e
}

// redisServer is a redis-server child on a free loopback port.
type redisServer struct {
	*proc
	addr string
}

func (r *redisServer) url() string { return "redis://" + r.addr }

// startRedis starts redis-server, keeping nothing on disk, and waits until
// it answers PING.
func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	bin := redistest.Require(tb)
	dir := childDir(tb, "redis")
	p, addr := startListening(tb, "redis-server", bin, func(addr string) []string {
		_, port, _ := strings.Cut(addr, ":")
		return []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning"}
	}, func(string) []string { return nil }, func(addr string) bool {
		reply, err := redistest.Do(addr, "PING")
		return err == nil && reply == "PONG"
	})
	return &redisServer{proc: p, addr: addr}
}

// deployment is one system on one topology: its servers ("brokers"), the
// clients that serve its workspaces, and the targets of the load generator.
type deployment struct {
	system, topology string
	brokers          []*server
	echo             *echoClients // the socket.io-client process, or nil
	bridges          []*proc      // tether-bridge: one per instance
	targets          []target
	redis            *redisServer // watched when the topology uses it
	measured         int          // calls measured so far
}

// deploy starts system on topology and checks that every workspace answers
// through every instance before it returns.
func (e *peersEnvironment) deploy(b *testing.B, system, topology string, round int) *deployment {
	b.Helper()
	instances := 1
	if topology == topoTwo {
		instances = 2
	}
	d := &deployment{system: system, topology: topology}
	base, _ := splitVariant(system)
	if topology == topoTwo {
		d.redis = e.redis
	}
	// A prefix of its own per deployment: nothing left in Redis by the
	// previous one can reach this one.
	prefix := fmt.Sprintf("bench-peers:%s:%d:%d:", system, round, time.Now().UnixNano())
	for i := range instances {
		d.brokers = append(d.brokers, e.startServerOf(b, system, topology, prefix, i))
	}
	workspaces := e.cfg.conns
	if base == sysBridge {
		workspaces = instances
	}
	callerToken := ""
	if base == sysTether || base == sysBridge {
		callerToken = mintToken(b, e.secret, auth.RoleCaller, auth.AnyWorkspace)
	}
	ws := func(i int) string { return fmt.Sprintf("ws-%d", i) }
	switch base {
	case sysBridge:
		for i := range instances {
			d.bridges = append(d.bridges, startBridge(b, e.tether, d.brokers[i], e.secret, ws(i)))
		}
	default:
		conns := make([]echoConn, workspaces)
		for i := range conns {
			conns[i] = echoConn{URL: d.brokers[i%instances].url, Workspace: ws(i)}
			if base == sysTether {
				conns[i].Token = mintToken(b, e.secret, auth.RoleBridge, ws(i))
			}
		}
		d.echo = startEchoClients(b, e, system, conns)
	}
	// Workspace-major: a worker's consecutive calls go to one workspace
	// through each instance in turn, so with two instances half of them
	// cross (workspace i is held by instance i mod 2).
	for i := range workspaces {
		for _, brk := range d.brokers {
			d.targets = append(d.targets, target{url: brk.url + "/api/v1/workspaces/" + ws(i) + "/calls", token: callerToken, peer: base != sysTether && base != sysBridge})
		}
	}
	d.probe(b)
	// Unmeasured load first, so that the first cell measures the system
	// as the later ones do: V8's compiler has optimized the node server's
	// and the echo client's hot paths (their first calls run interpreted)
	// and the Go runtime's pacers have settled.
	runLoadOver(b, d.targets, deployWarmupConc, loadConfig{measure: deployWarmup, runs: 1}, nil)
	return d
}

// The load every deployment gets before its first measured cell.
const (
	deployWarmup     = 2 * time.Second
	deployWarmupConc = 16
)

// variantSep joins tether and a value of TETHER_TUNING into the name of a
// system that is tether with those pieces off (BENCH_PEERS_TUNING):
// "tether~no-poller".
const variantSep = "~"

// variantOther is the variant of tether that is another build of it:
// BENCH_PEERS_OTHER_BIN names its binary (say, the main a change started
// from), measured in every round beside this one: "tether~other".
const (
	variantOther = "other"
	otherBinEnv  = "BENCH_PEERS_OTHER_BIN"
)

// splitVariant is the system a variant is of, and its TETHER_TUNING ("" for
// a system that is not a variant).
func splitVariant(system string) (base, tune string) {
	base, tune, _ = strings.Cut(system, variantSep)
	return base, tune
}

// startServerOf starts instance i of system's server.
func (e *peersEnvironment) startServerOf(b *testing.B, system, topology, prefix string, i int) *server {
	b.Helper()
	onRedis := topology == topoTwo
	base, tune := splitVariant(system)
	// Over TLS every system serves the same certificate.
	scheme, tlsArgs := "http", []string(nil)
	if topology == topoTLS {
		_, cert, key := benchTLSFiles(b)
		scheme, tlsArgs = "https", []string{"--tls-cert", cert, "--tls-key", key}
	}
	switch base {
	case sysTether, sysBridge:
		bin, env := e.tether, []string(nil)
		switch {
		case tune == variantOther:
			bin = os.Getenv(otherBinEnv)
		case tune != "":
			env = []string{tuning.Env + "=" + tune}
		}
		extra := tlsArgs
		if onRedis {
			extra = append(extra, "--redis", e.redis.url(), "--redis-prefix", prefix, "--instance-id", "peers-"+strconv.Itoa(i))
		}
		return startBrokerEnv(b, bin, e.secret, env, extra...)
	case sysNode:
		return startServerScheme(b, scheme, "node-peer", e.node, func(addr string) []string {
			args := append([]string{filepath.Join(e.peersDir, "node_peer.js"), "--listen", addr}, tlsArgs...)
			if onRedis {
				args = append(args, "--redis", e.redis.url(), "--key", prefix+"socket.io")
			}
			return args
		}, func(string) []string { return nil })
	case sysPython:
		return startServerScheme(b, scheme, "python-peer", systemPython, func(addr string) []string {
			args := append([]string{filepath.Join(e.peersDir, "python_peer.py"), "--listen", addr}, tlsArgs...)
			if onRedis {
				args = append(args, "--redis", e.redis.url(), "--channel", prefix+"socketio")
			}
			return args
		}, func(string) []string { return nil })
	}
	b.Fatalf("unknown system %q", system)
	return nil
}

// probe sends one call to every target and requires its payload back. A
// workspace another instance holds may take a moment to become routable;
// calls are retried for up to 15s.
func (d *deployment) probe(b *testing.B) {
	b.Helper()
	client := controlClient(b)
	deadline := time.Now().Add(15 * time.Second)
	for _, tgt := range d.targets {
		var err error
		if !testwait.Within(time.Until(deadline), func() bool { err = probeCall(client, tgt); return err == nil }) {
			b.Fatalf("%s %s: probe call to %s: %v\n%s", d.system, d.topology, tgt.url, err, d.logTails())
		}
	}
}

func probeCall(client *http.Client, tgt target) error {
	req, err := http.NewRequest(http.MethodPost, tgt.url, bytes.NewReader(callBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if tgt.token != "" {
		req.Header.Set("Authorization", "Bearer "+tgt.token)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.300s", res.StatusCode, body)
	}
	return checkAnswer(body)
}

// clientProcs are the processes that serve the deployment's workspaces.
func (d *deployment) clientProcs() []*proc {
	if d.echo != nil {
		return []*proc{d.echo.proc}
	}
	return d.bridges
}

// measure runs the load generator at concurrency conc against the
// deployment and returns the cell, with the CPU and peak memory of every
// process it watches.
func (d *deployment) measure(b *testing.B, conc int, cfg loadConfig) peersCell {
	b.Helper()
	type watched struct {
		role string
		p    *proc
	}
	var procs []watched
	for _, s := range d.brokers {
		procs = append(procs, watched{"broker", s.proc})
	}
	for _, p := range d.clientProcs() {
		procs = append(procs, watched{"client", p})
	}
	if d.redis != nil {
		procs = append(procs, watched{"redis", d.redis.proc})
	}
	watch := make([]int, len(procs))
	for i, w := range procs {
		resetPeakRSS(w.p.pid())
		watch[i] = w.p.pid()
	}
	s := runLoadOver(b, d.targets, conc, cfg, watch)
	cell := peersCell{
		System: d.system, Topology: d.topology, Conc: conc,
		Calls: len(s.lat), ElapsedS: s.elapsed.Seconds(), CallsPerS: s.rate(),
		P50Ms: ms(s.quantile(.5)), P99Ms: ms(s.quantile(.99)), P999Ms: ms(s.quantile(.999)),
		LoadgenCPUS: s.loadCPU.Seconds(),
		FailedCalls: s.failed, FirstFailure: s.firstFailure,
	}
	for i, w := range procs {
		_, peak, err := w.p.memKB()
		if err != nil {
			b.Fatal(err)
		}
		u := procUsage{Role: w.role, Name: w.p.name, CPUS: s.watchCPU[i].Seconds(), PeakRSSMB: float64(peak) / 1024}
		cell.Procs = append(cell.Procs, u)
		switch w.role {
		case "broker":
			cell.BrokerCPUS += u.CPUS
			cell.BrokerPeakRSSMB += u.PeakRSSMB
		case "client":
			cell.ClientCPUS += u.CPUS
		case "redis":
			cell.RedisCPUS += u.CPUS
		}
	}
	d.measured += cell.Calls
	if cell.BrokerCPUS > 0 {
		cell.CallsPerBrokerCPUS = float64(cell.Calls) / cell.BrokerCPUS
	}
	return cell
}

// resetPeakRSS resets the process's VmHWM to its current RSS, so that the
// next reading is the peak of the run that follows (Linux ≥ 4.0; when it
// cannot, the peak is the process's lifetime one).
func resetPeakRSS(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// stop ends the clients, then the servers. The echo client must still hold
// every connection and have answered at least the calls measured.
func (d *deployment) stop(b *testing.B) {
	b.Helper()
	if d.echo != nil {
		answered, connected := d.echo.stats(b)
		if want := len(d.targets) / len(d.brokers); connected != want {
			b.Errorf("%s %s: the echo client holds %d connections at the end, want %d\n%s", d.system, d.topology, connected, want, d.echo.logTail())
		}
		if answered < d.measured {
			b.Errorf("%s %s: the echo client answered %d calls, fewer than the %d measured", d.system, d.topology, answered, d.measured)
		}
		d.echo.stop(b)
	}
	for _, p := range d.bridges {
		p.stop(b)
	}
	for _, s := range d.brokers {
		s.stop(b)
	}
}

func (d *deployment) logTails() string {
	var parts []string
	for _, s := range d.brokers {
		parts = append(parts, s.logTail())
	}
	for _, p := range d.clientProcs() {
		parts = append(parts, p.logTail())
	}
	return strings.Join(parts, "\n")
}

// measureIdle starts one instance of system, then n idle socket.io-client
// connections to it, and measures what they cost it.
func (e *peersEnvironment) measureIdle(b *testing.B, system string, n int) peersIdle {
	b.Helper()
	needFiles(b, n+1000)
	srv := e.startServerOf(b, system, topoSingle, "", 0)
	base, _ := splitVariant(system)
	defer srv.stop(b)
	control := controlClient(b)
	rss0, _ := settledRSS(b, srv)
	var stats0 brokerRuntime
	var err error
	if base == sysTether {
		if stats0, err = runtimeStats(control, srv.url); err != nil {
			b.Fatal(err)
		}
	}
	conns := make([]echoConn, n)
	for i := range conns {
		conns[i] = echoConn{URL: srv.url, Workspace: fmt.Sprintf("idle-%d", i)}
		if base == sysTether {
			conns[i].Token = mintToken(b, e.secret, auth.RoleBridge, conns[i].Workspace)
		}
	}
	start := time.Now()
	clients := startEchoClients(b, e, base+"-idle", conns)
	defer clients.stop(b)
	dial := time.Since(start)
	rss, settle := settledRSS(b, srv)
	idle := peersIdle{System: system, Conns: n, RSSBeforeMB: float64(rss0) / 1024, RSSAfterMB: float64(rss) / 1024,
		KBPerConn: float64(rss-rss0) / float64(n), DialS: dial.Seconds(), SettleS: settle.Seconds()}
	if crss, _, err := clients.memKB(); err == nil {
		idle.ClientRSSMB = float64(crss) / 1024
	}
	// The server must really hold them all.
	held, err := heldConnections(control, srv.url, base, mintToken(b, e.secret, auth.RoleCaller, auth.AnyWorkspace))
	if err != nil {
		b.Fatal(err)
	}
	if held != n {
		b.Fatalf("%s holds %d connections, want %d", system, held, n)
	}
	if base == sysTether {
		stats, err := runtimeStats(control, srv.url)
		if err != nil {
			b.Fatal(err)
		}
		g := (stats.goroutines - stats0.goroutines) / float64(n)
		h := (stats.heapInuse - stats0.heapInuse) / 1024 / float64(n)
		idle.GoroutinesPerConn, idle.HeapKBPerConn = &g, &h
	}
	return idle
}

// heldConnections asks the server how many workspace connections it holds:
// tether lists its workspaces (callerToken lets it), the peers count their
// sockets in /healthz.
func heldConnections(client *http.Client, url, system, callerToken string) (int, error) {
	if system == sysTether {
		list, err := listWorkspaces(client, url, callerToken)
		return len(list), err
	}
	res, err := client.Get(url + "/healthz")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var h struct {
		Connections int `json:"connections"`
	}
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
		return 0, fmt.Errorf("reading %s /healthz: %w", system, err)
	}
	return h.Connections, nil
}
