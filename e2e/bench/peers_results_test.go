package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// peersRun is one run of BenchmarkPeers, as written to its JSON file: every
// measurement (Cells, Idle) and the figures derived from them.
type peersRun struct {
	Date     string       `json:"date"` // RFC 3339, UTC
	Command  string       `json:"command"`
	Machine  peersMachine `json:"machine"`
	Config   peersShape   `json:"config"`
	Full     bool         `json:"full"`               // the default matrix and rounds
	Partial  string       `json:"partial,omitempty"`  // how it differs when not
	WallS    float64      `json:"wall_s"`             // the measurements' wall time
	Cells    []peersCell  `json:"cells"`              // one per system, topology, concurrency and round
	Idle     []peersIdle  `json:"idle"`               // one per server and round
	Figures  []figure     `json:"figures"`            // medians, spreads and ratios over the rounds
	Baseline *baselineCmp `json:"baseline,omitempty"` // with BENCH_PEERS_BASELINE
}

// peersMachine says where the run ran and with which versions.
type peersMachine struct {
	Cores    int               `json:"cores"`
	CPUModel string            `json:"cpu_model"`
	MemoryGB float64           `json:"memory_gb"`
	Kernel   string            `json:"kernel"`
	LoadAvg  string            `json:"load_avg_at_start"` // /proc/loadavg: a busy machine shows here
	Versions map[string]string `json:"versions"`
}

// peersShape is the run's configuration.
type peersShape struct {
	MeasureS   float64  `json:"measure_s"`
	WarmupS    float64  `json:"warmup_s"`
	Rounds     int      `json:"rounds"`
	Systems    []string `json:"systems"`
	Topologies []string `json:"topologies"`
	Concs      []int    `json:"concurrencies"`
	Conns      int      `json:"echo_connections"`
	IdleConns  int      `json:"idle_connections"`
}

// peersCell is one measured run of one system, topology and concurrency.
// CPU times are over the measured window; the broker's are summed over its
// instances, as is its peak RSS.
type peersCell struct {
	System             string      `json:"system"`
	Topology           string      `json:"topology"`
	Conc               int         `json:"conc"`
	Round              int         `json:"round"`
	Calls              int         `json:"calls"`
	ElapsedS           float64     `json:"elapsed_s"`
	CallsPerS          float64     `json:"calls_per_s"`
	P50Ms              float64     `json:"p50_ms"`
	P99Ms              float64     `json:"p99_ms"`
	P999Ms             float64     `json:"p999_ms"`
	BrokerCPUS         float64     `json:"broker_cpu_s"`
	ClientCPUS         float64     `json:"client_cpu_s"`
	RedisCPUS          float64     `json:"redis_cpu_s"`
	LoadgenCPUS        float64     `json:"loadgen_cpu_s"`
	CallsPerBrokerCPUS float64     `json:"calls_per_broker_cpu_s"`
	BrokerPeakRSSMB    float64     `json:"broker_peak_rss_mb"`
	Procs              []procUsage `json:"procs"` // every watched process
	// FailedCalls are the calls a peer answered with a failure in the
	// measured window (not in Calls nor in the latencies), FirstFailure
	// the first one's error; tether has none (a failure ends the run).
	FailedCalls  int    `json:"failed_calls,omitempty"`
	FirstFailure string `json:"first_failure,omitempty"`
}

// procUsage is what one watched process used in a cell: CPU over the
// measured window, peak RSS over the cell (VmHWM, reset before it).
type procUsage struct {
	Role      string  `json:"role"` // broker, client or redis
	Name      string  `json:"name"`
	CPUS      float64 `json:"cpu_s"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
}

// peersIdle is one idle-connections measurement of one server.
type peersIdle struct {
	System            string   `json:"system"`
	Round             int      `json:"round"`
	Conns             int      `json:"conns"`
	RSSBeforeMB       float64  `json:"rss_before_mb"`
	RSSAfterMB        float64  `json:"rss_after_mb"`
	KBPerConn         float64  `json:"kb_per_conn"`
	GoroutinesPerConn *float64 `json:"goroutines_per_conn,omitempty"` // tether, from its /metrics
	HeapKBPerConn     *float64 `json:"heap_kb_per_conn,omitempty"`    // tether, Go heap in use
	ClientRSSMB       float64  `json:"client_rss_mb"`
	DialS             float64  `json:"dial_s"`
	SettleS           float64  `json:"settle_s"`
}

func (i peersIdle) goroutineNote() string {
	if i.GoroutinesPerConn == nil {
		return ""
	}
	return fmt.Sprintf(", %.2f goroutines and %.1f KB Go heap per connection", *i.GoroutinesPerConn, *i.HeapKBPerConn)
}

// The metrics of the figures.
const (
	metricRate = "calls_per_s"
	metricCPU  = "calls_per_broker_cpu_s"
	metricP50  = "p50_ms"
	metricP99  = "p99_ms"
	metricRSS  = "broker_peak_rss_mb"
	// metricTLSCost is a system's broker CPU per call over TLS against its
	// own in plaintext (one instance), round by round: 1.3 means TLS adds
	// 30%.
	metricTLSCost = "tls_cpu_per_call_x_plain"

	metricIdleKB         = "idle_kb_per_conn"
	metricIdleGoroutines = "idle_goroutines_per_conn"
	metricIdleHeapKB     = "idle_heap_kb_per_conn"

	topoIdle = "idle" // the topology of idle figures
)

// higherIsBetter tells the direction of each metric, for the baseline.
var higherIsBetter = map[string]bool{metricRate: true, metricCPU: true}

// figure is one number of the report: the median over the rounds of one
// metric of one system (or of a ratio "tether/node" taken within each
// round), with the samples it came from and their spread (max − min).
type figure struct {
	Key      string    `json:"key"`
	System   string    `json:"system"`
	Topology string    `json:"topology"`
	Conc     int       `json:"conc,omitempty"`
	Metric   string    `json:"metric"`
	Higher   bool      `json:"higher_is_better"`
	Samples  []float64 `json:"samples"`
	Median   float64   `json:"median"`
	Spread   float64   `json:"spread"`
}

func figureKey(system, topology string, conc int, metric string) string {
	if topology == topoIdle {
		return fmt.Sprintf("%s %s %s", system, topology, metric)
	}
	return fmt.Sprintf("%s %s c=%d %s", system, topology, conc, metric)
}

func newFigure(system, topology string, conc int, metric string, samples []float64) figure {
	lo, hi := slices.Min(samples), slices.Max(samples)
	return figure{Key: figureKey(system, topology, conc, metric), System: system, Topology: topology, Conc: conc, Metric: metric,
		Higher: higherIsBetter[metric], Samples: samples, Median: median(samples), Spread: hi - lo}
}

func newPeersRun(cfg peersConfig, e *peersEnvironment) *peersRun {
	full, partial := cfg.full()
	return &peersRun{
		Date:    time.Now().UTC().Format(time.RFC3339),
		Command: cfg.command,
		Machine: machineInfo(e),
		Config: peersShape{MeasureS: cfg.load.measure.Seconds(), WarmupS: cfg.load.warmup.Seconds(), Rounds: cfg.load.runs,
			Systems: cfg.systems, Topologies: cfg.topologies, Concs: cfg.concs, Conns: cfg.conns, IdleConns: cfg.idleConns},
		Full: full, Partial: partial,
	}
}

func machineInfo(e *peersEnvironment) peersMachine {
	m := peersMachine{Cores: runtime.NumCPU(), Versions: map[string]string{"go": runtime.Version()}}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb float64
			if _, err := fmt.Sscanf(sc.Text(), "MemTotal: %f kB", &kb); err == nil {
				m.MemoryGB = math.Round(kb/1024/1024*10) / 10
			}
		}
		_ = f.Close()
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	version := func(name string, args ...string) {
		if out, err := exec.Command(args[0], args[1:]...).Output(); err == nil {
			m.Versions[name] = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
		}
	}
	version("tether", e.tether, "version")
	version("node", e.node, "--version")
	version("python", systemPython, "-c", "import sys, aiohttp, engineio, socketio, importlib.metadata as m; print(sys.version.split()[0], 'python-socketio', m.version('python-socketio'), 'aiohttp', aiohttp.__version__)")
	version("redis-server", "redis-server", "--version")
	// "Redis server v=7.0.15 sha=… malloc=…": the version is enough.
	for f := range strings.FieldsSeq(m.Versions["redis-server"]) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			m.Versions["redis-server"] = v
		}
	}
	m.Versions["tether"] = strings.TrimPrefix(m.Versions["tether"], "tether ")
	for _, pkg := range []string{"socket.io", "@socket.io/redis-adapter", "redis"} {
		var p struct {
			Version string `json:"version"`
		}
		if data, err := os.ReadFile(filepath.Join(e.peersDir, "node_modules", pkg, "package.json")); err == nil && json.Unmarshal(data, &p) == nil {
			m.Versions["npm "+pkg] = p.Version
		}
	}
	var p struct {
		Version string `json:"version"`
	}
	if data, err := os.ReadFile(filepath.Join(e.clientsDir, "node_modules", "socket.io-client", "package.json")); err == nil && json.Unmarshal(data, &p) == nil {
		m.Versions["npm socket.io-client"] = p.Version
	}
	return m
}

// summarize derives the figures from the cells and idle measurements:
// medians per system, and ratios of each tether variant to each peer taken
// within each round.
func (r *peersRun) summarize() {
	r.Figures = nil
	type cellKey struct {
		system, topology string
		conc             int
	}
	byRound := map[cellKey]map[int]peersCell{}
	var keys []cellKey
	for _, c := range r.Cells {
		k := cellKey{c.System, c.Topology, c.Conc}
		if byRound[k] == nil {
			byRound[k] = map[int]peersCell{}
			keys = append(keys, k)
		}
		byRound[k][c.Round] = c
	}
	cellMetrics := []struct {
		name string
		get  func(peersCell) float64
	}{
		{metricRate, func(c peersCell) float64 { return c.CallsPerS }},
		{metricCPU, func(c peersCell) float64 { return c.CallsPerBrokerCPUS }},
		{metricP50, func(c peersCell) float64 { return c.P50Ms }},
		{metricP99, func(c peersCell) float64 { return c.P99Ms }},
		{metricRSS, func(c peersCell) float64 { return c.BrokerPeakRSSMB }},
	}
	for _, k := range keys {
		for _, m := range cellMetrics {
			var samples []float64
			for _, round := range sortedRounds(byRound[k]) {
				if v := m.get(byRound[k][round]); v > 0 || m.name != metricCPU {
					samples = append(samples, v)
				}
			}
			if len(samples) > 0 {
				r.Figures = append(r.Figures, newFigure(k.system, k.topology, k.conc, m.name, samples))
			}
		}
	}
	// Each system against the ones it is compared with, round by round.
	for _, k := range keys {
		for _, peer := range comparedWith(k.system) {
			other := byRound[cellKey{peer, k.topology, k.conc}]
			if other == nil {
				continue
			}
			for _, m := range cellMetrics {
				var samples []float64
				for _, round := range sortedRounds(byRound[k]) {
					if o, ok := other[round]; ok && m.get(o) > 0 && m.get(byRound[k][round]) > 0 {
						samples = append(samples, m.get(byRound[k][round])/m.get(o))
					}
				}
				if len(samples) > 0 {
					r.Figures = append(r.Figures, newFigure(k.system+"/"+peer, k.topology, k.conc, m.name, samples))
				}
			}
		}
	}
	// What TLS costs each system: its plaintext calls per broker CPU-s
	// over its TLS ones, within each round.
	for _, k := range keys {
		plain := byRound[cellKey{k.system, topoSingle, k.conc}]
		if k.topology != topoTLS || plain == nil {
			continue
		}
		var samples []float64
		for _, round := range sortedRounds(byRound[k]) {
			if p, ok := plain[round]; ok && p.CallsPerBrokerCPUS > 0 && byRound[k][round].CallsPerBrokerCPUS > 0 {
				samples = append(samples, p.CallsPerBrokerCPUS/byRound[k][round].CallsPerBrokerCPUS)
			}
		}
		if len(samples) > 0 {
			r.Figures = append(r.Figures, newFigure(k.system, topoTLS, k.conc, metricTLSCost, samples))
		}
	}

	idle := map[string]map[int]peersIdle{}
	var systems []string
	for _, i := range r.Idle {
		if idle[i.System] == nil {
			idle[i.System] = map[int]peersIdle{}
			systems = append(systems, i.System)
		}
		idle[i.System][i.Round] = i
	}
	for _, sys := range systems {
		var kb, gor, heap []float64
		for _, round := range sortedRounds(idle[sys]) {
			i := idle[sys][round]
			kb = append(kb, i.KBPerConn)
			if i.GoroutinesPerConn != nil {
				gor, heap = append(gor, *i.GoroutinesPerConn), append(heap, *i.HeapKBPerConn)
			}
		}
		r.Figures = append(r.Figures, newFigure(sys, topoIdle, 0, metricIdleKB, kb))
		if len(gor) > 0 {
			r.Figures = append(r.Figures, newFigure(sys, topoIdle, 0, metricIdleGoroutines, gor), newFigure(sys, topoIdle, 0, metricIdleHeapKB, heap))
		}
	}
	for _, sys := range systems {
		for _, peer := range comparedWith(sys) {
			var samples []float64
			for _, round := range sortedRounds(idle[sys]) {
				if o, ok := idle[peer][round]; ok && o.KBPerConn > 0 {
					samples = append(samples, idle[sys][round].KBPerConn/o.KBPerConn)
				}
			}
			if len(samples) > 0 {
				r.Figures = append(r.Figures, newFigure(sys+"/"+peer, topoIdle, 0, metricIdleKB, samples))
			}
		}
	}
}

// comparedWith lists the systems whose figures a system's are divided by,
// round by round: tether and its bridges against the peers, and a variant
// of tether (BENCH_PEERS_TUNING, BENCH_PEERS_OTHER_BIN) against tether
// itself, to show what the variant changes.
func comparedWith(system string) []string {
	switch base, tune := splitVariant(system); {
	case tune != "":
		return []string{base}
	case system == sysTether || system == sysBridge:
		return []string{sysNode, sysPython}
	}
	return nil
}

// sortedRounds returns the rounds of m in order.
func sortedRounds[T any](m map[int]T) []int {
	rs := slices.Collect(maps.Keys(m))
	slices.Sort(rs)
	return rs
}

// figure returns the figure with key, or nil.
func (r *peersRun) figure(system, topology string, conc int, metric string) *figure {
	key := figureKey(system, topology, conc, metric)
	for i := range r.Figures {
		if r.Figures[i].Key == key {
			return &r.Figures[i]
		}
	}
	return nil
}

// baselineCmp is the comparison of a run with an earlier one.
type baselineCmp struct {
	Path     string        `json:"path"`
	Date     string        `json:"date"`
	Note     string        `json:"note,omitempty"` // how the baseline's settings differ
	Compared int           `json:"compared"`       // figures found in both runs
	Worse    []worseFigure `json:"worse"`
}

// worseFigure is a figure that got worse by more than the run-to-run
// spread: the larger of the two runs' spreads of it.
type worseFigure struct {
	Key    string   `json:"key"`
	Old    float64  `json:"old"`
	New    float64  `json:"new"`
	Spread float64  `json:"spread"`
	Change *float64 `json:"change,omitempty"` // (new − old) / old; none when old is 0
}

// compareBaseline flags every figure worse than in the run at path by more
// than the spread of either run.
func (r *peersRun) compareBaseline(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the baseline: %w", err)
	}
	var old peersRun
	if err := json.Unmarshal(data, &old); err != nil {
		return fmt.Errorf("decoding the baseline %s: %w", path, err)
	}
	r.Baseline = compareFigures(path, old, r.Figures)
	r.Baseline.Note = old.Config.differences(r.Config)
	return nil
}

// differences says how the settings of two runs differ, "" when they do
// not in what the figures depend on.
func (s peersShape) differences(now peersShape) string {
	var d []string
	if s.MeasureS != now.MeasureS || s.WarmupS != now.WarmupS {
		d = append(d, fmt.Sprintf("%gs per cell after %gs warm-up, now %gs after %gs", s.MeasureS, s.WarmupS, now.MeasureS, now.WarmupS))
	}
	if s.Conns != now.Conns {
		d = append(d, fmt.Sprintf("%d echo connections, now %d", s.Conns, now.Conns))
	}
	if s.IdleConns != now.IdleConns {
		d = append(d, fmt.Sprintf("%d idle connections, now %d", s.IdleConns, now.IdleConns))
	}
	return strings.Join(d, "; ")
}

func compareFigures(path string, old peersRun, figures []figure) *baselineCmp {
	cmp := &baselineCmp{Path: path, Date: old.Date, Worse: []worseFigure{}}
	before := map[string]figure{}
	for _, f := range old.Figures {
		before[f.Key] = f
	}
	for _, f := range figures {
		o, ok := before[f.Key]
		if !ok {
			continue
		}
		cmp.Compared++
		loss := f.Median - o.Median // how much worse
		if f.Higher {
			loss = -loss
		}
		spread := max(f.Spread, o.Spread)
		if loss > spread && loss > 0 {
			w := worseFigure{Key: f.Key, Old: o.Median, New: f.Median, Spread: spread}
			if o.Median != 0 {
				change := (f.Median - o.Median) / o.Median
				w.Change = &change
			}
			cmp.Worse = append(cmp.Worse, w)
		}
	}
	return cmp
}
