package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/tuning"
)

// peersEnv, set to 1 by `make bench-peers`, enables BenchmarkPeers and
// TestPeersInterruptStopsEveryChild: they need the peers' npm packages and
// take minutes, so `make bench` and `make test` leave them out.
const peersEnv = "TETHER_BENCH_PEERS"

// peersConfig is the shape of a bench-peers run, from the environment.
type peersConfig struct {
	load       loadConfig // BENCH_DURATION, BENCH_WARMUP; load.runs is the number of rounds
	systems    []string   // BENCH_PEERS_SYSTEMS, then a variant of tether per BENCH_PEERS_TUNING entry
	topologies []string   // BENCH_PEERS_TOPOLOGIES
	concs      []int      // BENCH_PEERS_CONC
	conns      int        // BENCH_PEERS_CONNS: echo connections, one workspace each
	idleConns  int        // BENCH_PEERS_IDLE_CONNS: 0 leaves the idle measurement out
	outDir     string     // BENCH_PEERS_OUT
	baseline   string     // BENCH_PEERS_BASELINE: an earlier run's JSON
	doc        string     // BENCH_PEERS_DOC: the markdown file whose results section to fill
	command    string     // BENCH_PEERS_COMMAND: how the run was started, for the report
}

// Defaults of a full run; the report says when a run differs from them.
var (
	peersDefaultSystems    = []string{sysTether, sysBridge, sysNode, sysPython}
	peersDefaultTopologies = []string{topoSingle, topoTwo, topoTLS}
	peersDefaultConcs      = []int{1, 16, 64}
)

const (
	peersDefaultRounds    = 3
	peersDefaultConns     = 100
	peersDefaultIdleConns = 10000
)

func peersConfigFromEnv(tb testing.TB) peersConfig {
	tb.Helper()
	c := peersConfig{
		load:       loadConfigFromEnv(tb),
		systems:    peersDefaultSystems,
		topologies: peersDefaultTopologies,
		concs:      peersDefaultConcs,
		conns:      peersDefaultConns,
		idleConns:  peersDefaultIdleConns,
		outDir:     filepath.Join(os.TempDir(), "tether-bench-peers"),
		baseline:   os.Getenv("BENCH_PEERS_BASELINE"),
		doc:        os.Getenv("BENCH_PEERS_DOC"),
		command:    peersCommand(),
	}
	if os.Getenv("BENCH_RUNS") == "" {
		c.load.runs = peersDefaultRounds
	}
	list := func(name string, dst *[]string, allowed []string) {
		v := os.Getenv(name)
		if v == "" {
			return
		}
		var out []string
		for s := range strings.SplitSeq(v, ",") {
			if !slices.Contains(allowed, s) {
				tb.Fatalf("%s=%q: %q is not one of %s", name, v, s, strings.Join(allowed, ","))
			}
			out = append(out, s)
		}
		*dst = out
	}
	list("BENCH_PEERS_SYSTEMS", &c.systems, peersDefaultSystems)
	// BENCH_PEERS_TUNING: values of TETHER_TUNING separated by spaces
	// ("off no-poller no-callserver"); each adds tether with those pieces
	// off, measured beside tether in every round, and the report gives each
	// one's figures against tether's (summarize: "tether~no-poller/tether").
	for v := range strings.FieldsSeq(os.Getenv("BENCH_PEERS_TUNING")) {
		if _, err := tuning.Parse(v); err != nil {
			tb.Fatalf("BENCH_PEERS_TUNING: %v", err)
		}
		if !slices.Contains(c.systems, sysTether) {
			tb.Fatalf("BENCH_PEERS_TUNING needs %s among the systems, to compare with", sysTether)
		}
		c.systems = append(c.systems, sysTether+variantSep+v)
	}
	if bin := os.Getenv(otherBinEnv); bin != "" {
		if !slices.Contains(c.systems, sysTether) {
			tb.Fatalf("%s needs %s among the systems, to compare with", otherBinEnv, sysTether)
		}
		if _, err := os.Stat(bin); err != nil {
			tb.Fatalf("%s: %v", otherBinEnv, err)
		}
		c.systems = append(c.systems, sysTether+variantSep+variantOther)
	}
	list("BENCH_PEERS_TOPOLOGIES", &c.topologies, peersDefaultTopologies)
	if v := os.Getenv("BENCH_PEERS_CONC"); v != "" {
		c.concs = nil
		for s := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				tb.Fatalf("BENCH_PEERS_CONC=%q: want positive integers, comma separated", v)
			}
			c.concs = append(c.concs, n)
		}
	}
	count := func(name string, dst *int, least int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < least {
				tb.Fatalf("%s=%q: want an integer ≥ %d", name, v, least)
			}
			*dst = n
		}
	}
	count("BENCH_PEERS_CONNS", &c.conns, 2)
	count("BENCH_PEERS_IDLE_CONNS", &c.idleConns, 0)
	if v := os.Getenv("BENCH_PEERS_OUT"); v != "" {
		c.outDir = v
	}
	return c
}

// full reports whether the run has the default matrix and rounds (its
// figures are the ones to quote), and otherwise how it differs.
func (c peersConfig) full() (bool, string) {
	var diffs []string
	if c.load.runs < peersDefaultRounds {
		diffs = append(diffs, fmt.Sprintf("%d round(s)", c.load.runs))
	}
	if c.load.measure < 3*time.Second {
		diffs = append(diffs, fmt.Sprintf("%v per cell", c.load.measure))
	}
	if !slices.Equal(c.systems, peersDefaultSystems) || !slices.Equal(c.topologies, peersDefaultTopologies) || !slices.Equal(c.concs, peersDefaultConcs) {
		diffs = append(diffs, "a partial matrix")
	}
	if c.conns != peersDefaultConns {
		diffs = append(diffs, fmt.Sprintf("%d echo connections", c.conns))
	}
	if c.idleConns != peersDefaultIdleConns {
		diffs = append(diffs, fmt.Sprintf("%d idle connections", c.idleConns))
	}
	return len(diffs) == 0, strings.Join(diffs, ", ")
}

// peersCommand is the command line that started the run, for the report:
// BENCH_PEERS_COMMAND (make bench-peers sets it), after the BENCH_ settings
// in the environment.
func peersCommand() string {
	cmd := os.Getenv("BENCH_PEERS_COMMAND")
	if cmd == "" {
		cmd = `go test -run '^$' -bench '^BenchmarkPeers$' -benchtime 1x ./e2e/bench/`
	}
	var knobs []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case !strings.HasPrefix(name, "BENCH_"), value == "", // make passes its unset variables empty
			name == "BENCH_PEERS_COMMAND", name == "BENCH_PEERS_OUT", name == "BENCH_PEERS_DOC", name == "BENCH_PEERS_BASELINE", name == "BENCH_PEERS_RENDER":
			continue
		}
		knobs = append(knobs, kv)
	}
	slices.Sort(knobs)
	return strings.TrimSpace(strings.Join(knobs, " ") + " " + cmd)
}

// BenchmarkPeers runs tether side by side with the servers people would run
// instead: node socket.io (with @socket.io/redis-adapter on two instances)
// and python-socketio (with AsyncRedisManager), all behind the same caller
// API and driven the same way:
//
//   - one echo client process (e2e/clients/echo_clients.js, the real
//     socket.io-client) holds BENCH_PEERS_CONNS connections, one workspace
//     each, and answers every tool_call through its ack at once; tether is
//     also measured with its own bridges as the clients (one per instance);
//   - this process is the closed-loop load generator (runLoadOver): C
//     workers send POST /api/v1/workspaces/{id}/calls round-robin over the
//     workspaces and the instances, so with two instances half the calls
//     cross them;
//   - the matrix is topology (one instance; two on one Redis) × concurrency
//     × system, the whole matrix once per round (BENCH_RUNS, default 3), so
//     that drift on a shared machine hits every system alike; ratios are
//     taken within a round, then their median;
//   - each round ends with the idle measurement: BENCH_PEERS_IDLE_CONNS
//     (10,000) idle connections to each server, RSS growth per connection.
//
// The CPU time and peak RSS of every process come from /proc. The run's
// JSON, an SVG chart and a markdown report go to BENCH_PEERS_OUT; with
// BENCH_PEERS_DOC the report also fills that file's results section;
// with BENCH_PEERS_BASELINE every figure worse than the baseline's by more
// than the run-to-run spread is flagged; BENCH_PEERS_RENDER, an earlier
// run's JSON, writes its report again without measuring. `make bench-peers`
// sets it all up.
func BenchmarkPeers(b *testing.B) {
	if os.Getenv(peersEnv) != "1" {
		b.Skipf("%s is not 1: run `make bench-peers`, which installs the peers and sets it", peersEnv)
	}
	cfg := peersConfigFromEnv(b)
	if path := os.Getenv("BENCH_PEERS_RENDER"); path != "" {
		renderPeersRun(b, cfg, path)
		return
	}
	env := newPeersEnv(b, cfg)
	run := newPeersRun(cfg, env)
	fmt.Printf("\npeers: %d round(s) × %v (after %v warm-up) per cell; systems %s; topologies %s; c=%v; %d echo connections; %d idle connections; CPUs: %d\n",
		cfg.load.runs, cfg.load.measure, cfg.load.warmup, strings.Join(cfg.systems, ","), strings.Join(cfg.topologies, ","), cfg.concs, cfg.conns, cfg.idleConns, run.Machine.Cores)
	start := time.Now()
	for round := 1; round <= cfg.load.runs; round++ {
		for _, topo := range cfg.topologies {
			for _, sys := range cfg.systems {
				dep := env.deploy(b, sys, topo, round)
				for _, conc := range cfg.concs {
					fmt.Printf("peers: measuring %s %s c=%d round %d/%d\n", sys, topo, conc, round, cfg.load.runs)
					cell := dep.measure(b, conc, cfg.load)
					cell.Round = round
					run.Cells = append(run.Cells, cell)
					fmt.Printf("  %-13s %-6s c=%-3d %8.0f calls/s  p50 %7.3f ms  p99 %7.3f ms  %8.0f calls/broker-CPU-s  broker peak %6.1f MB  cores: broker %.2f client %.2f redis %.2f loadgen %.2f\n",
						sys, topo, conc, cell.CallsPerS, cell.P50Ms, cell.P99Ms, cell.CallsPerBrokerCPUS, cell.BrokerPeakRSSMB,
						cell.BrokerCPUS/cell.ElapsedS, cell.ClientCPUS/cell.ElapsedS, cell.RedisCPUS/cell.ElapsedS, cell.LoadgenCPUS/cell.ElapsedS)
				}
				dep.stop(b)
			}
		}
		if cfg.idleConns > 0 {
			for _, sys := range cfg.systems {
				if sys == sysBridge {
					continue // a bridge serves one workspace: nothing to add to tether's figure
				}
				fmt.Printf("peers: idle %s, %d connections, round %d/%d\n", sys, cfg.idleConns, round, cfg.load.runs)
				idle := env.measureIdle(b, sys, cfg.idleConns)
				idle.Round = round
				run.Idle = append(run.Idle, idle)
				fmt.Printf("  %-13s idle: %.1f KB RSS per connection (%.1f → %.1f MB)%s\n", sys, idle.KBPerConn, idle.RSSBeforeMB, idle.RSSAfterMB, idle.goroutineNote())
			}
		}
	}
	run.WallS = time.Since(start).Seconds()
	report(b, cfg, run)
	printTuning(run)
	b.ReportMetric(0, "ns/op")
	for _, f := range run.Figures {
		if f.System == sysTether+"/"+sysNode && f.Conc == 64 && f.Metric == metricCPU {
			b.ReportMetric(f.Median, f.Topology+"-x-node-calls/cpu-s")
		}
	}
}

// report derives the run's figures, compares them with the baseline, and
// writes and prints the report.
func report(b *testing.B, cfg peersConfig, run *peersRun) {
	b.Helper()
	run.summarize()
	if cfg.baseline != "" {
		if err := run.compareBaseline(cfg.baseline); err != nil {
			b.Fatal(err)
		}
	}
	paths, err := run.write(cfg)
	if err != nil {
		b.Fatal(err)
	}
	run.printReport(os.Stdout)
	fmt.Printf("\npeers: wrote %s\n", strings.Join(paths, ", "))
}

// renderPeersRun writes the report of an earlier run from its JSON, without
// measuring anything (BENCH_PEERS_RENDER): the figures are derived again
// from its cells, so a report can be redone from the same measurements.
func renderPeersRun(b *testing.B, cfg peersConfig, path string) {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatalf("BENCH_PEERS_RENDER: %v", err)
	}
	var run peersRun
	if err := json.Unmarshal(data, &run); err != nil {
		b.Fatalf("BENCH_PEERS_RENDER: decoding %s: %v", path, err)
	}
	run.Baseline = nil
	report(b, cfg, &run)
}

// printTuning prints what each variant of tether (BENCH_PEERS_TUNING, and
// BENCH_PEERS_OTHER_BIN's build)
// measured against tether with every piece on, in the same rounds:
// medians of the per-round ratios, variant over tether. Calls per broker
// CPU-second below 1 and p99 above 1 are what the pieces turned off earn.
func printTuning(run *peersRun) {
	var lines []string
	for _, f := range run.Figures {
		variant, compared, _ := strings.Cut(f.System, "/")
		if base, tune := splitVariant(variant); base != sysTether || tune == "" || compared != sysTether {
			continue
		}
		switch f.Metric {
		case metricCPU, metricP99, metricIdleKB:
			lines = append(lines, fmt.Sprintf("  %-40s %-6s c=%-3d %-24s ×%.3f (rounds: %v)", f.System, f.Topology, f.Conc, f.Metric, f.Median, f.Samples))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Println("\npeers: each variant of tether against tether (median of per-round ratios):")
	for _, l := range lines {
		fmt.Println(l)
	}
}
