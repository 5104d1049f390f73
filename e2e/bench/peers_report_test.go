package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The results section of the benchmarks document lies between these
// markers; BenchmarkPeers rewrites what is between them and nothing else.
const (
	docBegin = "<!-- bench-peers:begin: written by BenchmarkPeers (make bench-peers UPDATE_DOCS=1); edits here are overwritten -->"
	docEnd   = "<!-- bench-peers:end -->"
	// docChart is the chart's file name next to the document.
	docChart = "benchmarks-peers.svg"
)

// peersTarget is a goal for tether against a peer, as a ratio.
type peersTarget struct {
	what             string
	system, topology string
	conc             int
	metric           string
	want             float64
	atLeast          bool // the ratio must be ≥ want; otherwise ≤ want
}

// peersTargets are tether's goals against the peers (ratios in one run).
var peersTargets = []peersTarget{
	{"one instance, c=64: calls per broker CPU-s", "tether/node", topoSingle, 64, metricCPU, 2, true},
	{"one instance, c=64: p99", "tether/node", topoSingle, 64, metricP99, 0.5, false},
	{"one instance, c=1: p50", "tether/node", topoSingle, 1, metricP50, 0.8, false},
	{"one instance, c=1: calls per broker CPU-s", "tether/node", topoSingle, 1, metricCPU, 1.5, true},
	{"two instances, c=64: calls per broker CPU-s", "tether/node", topoTwo, 64, metricCPU, 2.5, true},
	{"two instances, c=64: p99", "tether/node", topoTwo, 64, metricP99, 0.4, false},
	{"one instance over TLS, c=64: calls per broker CPU-s", "tether/node", topoTLS, 64, metricCPU, 2, true},
	{"over TLS, c=64: broker CPU per call against plaintext", sysTether, topoTLS, 64, metricTLSCost, 1.3, false},
	{"idle: memory per connection", "tether/node", topoIdle, 0, metricIdleKB, 0.5, false},
	{"one instance, c=64: calls per broker CPU-s", "tether/python", topoSingle, 64, metricCPU, 10, true},
	{"two instances, c=64: calls per broker CPU-s", "tether/python", topoTwo, 64, metricCPU, 10, true},
}

// write writes the run's JSON, chart and markdown report to the output
// directory, and fills the document's results section when asked. It
// returns the paths written.
func (r *peersRun) write(cfg peersConfig) ([]string, error) {
	if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", cfg.outDir, err)
	}
	// Named after the run's start, so that a report written again from the
	// same measurements (BENCH_PEERS_RENDER) replaces the first one.
	stamp := time.Now().UTC().Format("20060102-150405")
	if t, err := time.Parse(time.RFC3339, r.Date); err == nil {
		stamp = t.UTC().Format("20060102-150405")
	}
	base := filepath.Join(cfg.outDir, "peers-"+stamp)
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the run: %w", err)
	}
	chart := peersChart(r)
	var report bytes.Buffer
	fmt.Fprintf(&report, "# tether and its peers: make bench-peers\n\n")
	r.writeMarkdown(&report, filepath.Base(base)+".svg")
	files := map[string][]byte{base + ".json": append(data, '\n'), base + ".svg": chart, base + ".md": report.Bytes()}
	if cfg.doc != "" {
		doc, err := os.ReadFile(cfg.doc)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", cfg.doc, err)
		}
		var section bytes.Buffer
		r.writeMarkdown(&section, docChart)
		files[cfg.doc] = fillSection(doc, section.Bytes())
		files[filepath.Join(filepath.Dir(cfg.doc), docChart)] = chart
	}
	paths := slices.Sorted(maps.Keys(files))
	for _, p := range paths {
		if err := os.WriteFile(p, files[p], 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return paths, nil
}

// fillSection replaces what lies between docBegin and docEnd in doc with
// section, appending the markers and section when doc has none.
func fillSection(doc, section []byte) []byte {
	begin, end := bytes.Index(doc, []byte(docBegin)), bytes.Index(doc, []byte(docEnd))
	var out bytes.Buffer
	if begin < 0 || end < begin {
		out.Write(bytes.TrimRight(doc, "\n"))
		out.WriteString("\n\n")
	} else {
		out.Write(doc[:begin])
	}
	out.WriteString(docBegin + "\n\n")
	out.Write(section)
	out.WriteString("\n" + docEnd + "\n")
	if begin >= 0 && end >= begin {
		out.Write(bytes.TrimLeft(doc[end+len(docEnd):], "\n"))
	}
	return out.Bytes()
}

// printReport writes the report to out (the console).
func (r *peersRun) printReport(out io.Writer) {
	fmt.Fprintln(out)
	r.writeMarkdown(out, "")
}

// writeMarkdown writes the results: how the run was made, the tables, the
// targets, the baseline comparison, and the chart when chart is not "".
func (r *peersRun) writeMarkdown(out io.Writer, chart string) {
	rounds := r.Config.Rounds
	fmt.Fprintf(out, "### Results of the run of %s\n\n", r.dateLabel())
	if !r.Full {
		fmt.Fprintf(out, "> **Short validation run, not the default matrix** (%s): a check that the harness works, not figures to quote.\n\n", r.Partial)
	}
	if load := r.loadAtStart(); load > float64(r.Machine.Cores) {
		fmt.Fprintf(out, "> **The machine was busy with other work** (load average %.1f on %d cores when the run started): calls/s and latencies are lower than on a quiet machine, and ratios noisier.\n\n", load, r.Machine.Cores)
	}
	fmt.Fprintf(out, "- command: `%s`\n", r.Command)
	fmt.Fprintf(out, "- machine: %d cores, %s, %.1f GB memory, Linux %s; load average at start %s\n", r.Machine.Cores, r.Machine.CPUModel, r.Machine.MemoryGB, r.Machine.Kernel, r.Machine.LoadAvg)
	var versions []string
	for _, k := range slices.Sorted(maps.Keys(r.Machine.Versions)) {
		versions = append(versions, k+" "+r.Machine.Versions[k])
	}
	fmt.Fprintf(out, "- versions: %s\n", strings.Join(versions, "; "))
	fmt.Fprintf(out, "- %d round(s) of the whole matrix, %gs measured per cell after %gs warm-up; %d echo connections; %d idle connections; measurements took %.0fs\n\n",
		rounds, r.Config.MeasureS, r.Config.WarmupS, r.Config.Conns, r.Config.IdleConns, r.WallS)

	rng := func(f *figure, format string) string {
		if f == nil {
			return "–"
		}
		v := fmt.Sprintf(format, f.Median)
		if len(f.Samples) > 1 {
			v += fmt.Sprintf(" ("+format+"–"+format+")", slices.Min(f.Samples), slices.Max(f.Samples))
		}
		return v
	}
	fmt.Fprintf(out, "#### Calls: medians over the rounds (min–max)\n\n")
	fmt.Fprintf(out, "| system | topology | c | calls/s | p50 ms | p99 ms | calls per broker CPU-s | broker peak RSS MB | cores used: broker, client, redis, load generator |\n")
	fmt.Fprintf(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, topo := range r.Config.Topologies {
		for _, conc := range r.Config.Concs {
			for _, sys := range r.Config.Systems {
				if r.figure(sys, topo, conc, metricRate) == nil {
					continue
				}
				fmt.Fprintf(out, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", systemLabels[sys], topologyLabel(topo), conc,
					rng(r.figure(sys, topo, conc, metricRate), "%.0f"), rng(r.figure(sys, topo, conc, metricP50), "%.3f"),
					rng(r.figure(sys, topo, conc, metricP99), "%.3f"), rng(r.figure(sys, topo, conc, metricCPU), "%.0f"),
					rng(r.figure(sys, topo, conc, metricRSS), "%.0f"), r.coreShares(sys, topo, conc))
			}
		}
	}
	for _, c := range r.Cells {
		if c.FailedCalls > 0 {
			fmt.Fprintf(out, "\nA peer answered calls with a failure (left out of its figures): %s, %s, c=%d, round %d: %d, the first %q.\n",
				systemLabels[c.System], topologyLabel(c.Topology), c.Conc, c.Round, c.FailedCalls, c.FirstFailure)
		}
	}
	fmt.Fprintf(out, "\n#### Ratios tether / peer: medians of the ratios within each round\n\n")
	fmt.Fprintf(out, "Above 1 is better for calls per broker CPU-s and calls/s; below 1 is better for latency and memory.\n\n")
	fmt.Fprintf(out, "| tether variant / peer | topology | c | calls per broker CPU-s | p50 | p99 | calls/s | broker peak RSS |\n")
	fmt.Fprintf(out, "|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, variant := range []string{sysTether, sysBridge} {
		for _, peer := range []string{sysNode, sysPython} {
			ratio := variant + "/" + peer
			for _, topo := range r.Config.Topologies {
				for _, conc := range r.Config.Concs {
					if r.figure(ratio, topo, conc, metricCPU) == nil {
						continue
					}
					fmt.Fprintf(out, "| %s / %s | %s | %d | %s | %s | %s | %s | %s |\n", systemLabels[variant], systemLabels[peer], topologyLabel(topo), conc,
						rng(r.figure(ratio, topo, conc, metricCPU), "%.2f"), rng(r.figure(ratio, topo, conc, metricP50), "%.2f"),
						rng(r.figure(ratio, topo, conc, metricP99), "%.2f"), rng(r.figure(ratio, topo, conc, metricRate), "%.2f"),
						rng(r.figure(ratio, topo, conc, metricRSS), "%.2f"))
				}
			}
		}
	}
	var tlsRows []string
	for _, sys := range r.Config.Systems {
		for _, conc := range r.Config.Concs {
			if f := r.figure(sys, topoTLS, conc, metricTLSCost); f != nil {
				tlsRows = append(tlsRows, fmt.Sprintf("| %s | %d | %s |\n", systemLabels[sys], conc, rng(f, "%.2f")))
			}
		}
	}
	if len(tlsRows) > 0 {
		fmt.Fprintf(out, "\n#### What TLS costs: broker CPU per call over TLS / in plaintext, one instance (medians of the ratios within each round)\n\n")
		fmt.Fprintf(out, "| system | c | TLS / plaintext |\n|---|--:|--:|\n")
		for _, row := range tlsRows {
			fmt.Fprint(out, row)
		}
	}
	if len(r.Idle) > 0 {
		fmt.Fprintf(out, "\n#### Idle connections: %d socket.io-client connections to one instance\n\n", r.Config.IdleConns)
		fmt.Fprintf(out, "| system | RSS growth per connection KB | goroutines per connection | Go heap per connection KB | tether / this |\n")
		fmt.Fprintf(out, "|---|--:|--:|--:|--:|\n")
		for _, sys := range r.Config.Systems {
			kb := r.figure(sys, topoIdle, 0, metricIdleKB)
			if kb == nil {
				continue
			}
			ratio := "–"
			if f := r.figure(sysTether+"/"+sys, topoIdle, 0, metricIdleKB); f != nil {
				ratio = rng(f, "%.2f")
			}
			fmt.Fprintf(out, "| %s | %s | %s | %s | %s |\n", systemLabels[sys], rng(kb, "%.1f"),
				rng(r.figure(sys, topoIdle, 0, metricIdleGoroutines), "%.2f"), rng(r.figure(sys, topoIdle, 0, metricIdleHeapKB), "%.1f"), ratio)
		}
	}
	fmt.Fprintf(out, "\n#### Targets: tether / peer, same run\n\n")
	fmt.Fprintf(out, "| target | ratio | want | |\n|---|--:|--:|---|\n")
	for _, t := range peersTargets {
		f := r.figure(t.system, t.topology, t.conc, t.metric)
		if f == nil {
			continue
		}
		want, met := "≤ ", f.Median <= t.want
		if t.atLeast {
			want, met = "≥ ", f.Median >= t.want
		}
		fmt.Fprintf(out, "| %s, %s | %.2f | %s%g | %s |\n", t.what, t.system, f.Median, want, t.want, verdict(met))
	}
	if b := r.Baseline; b != nil {
		fmt.Fprintf(out, "\n#### Against the baseline %s (run of %s)\n\n", b.Path, b.Date)
		if b.Note != "" {
			fmt.Fprintf(out, "> The baseline ran with other settings (%s): figures that depend on them are not comparable.\n\n", b.Note)
		}
		if len(b.Worse) == 0 {
			fmt.Fprintf(out, "None of the %d figures found in both runs got worse by more than the run-to-run spread.\n", b.Compared)
		} else {
			fmt.Fprintf(out, "%d of the %d figures found in both runs got worse by more than the run-to-run spread (the larger of the two runs' max − min):\n\n", len(b.Worse), b.Compared)
			fmt.Fprintf(out, "| figure | baseline | now | change | spread |\n|---|--:|--:|--:|--:|\n")
			for _, w := range b.Worse {
				change := "–"
				if w.Change != nil {
					change = fmt.Sprintf("%+.1f%%", 100**w.Change)
				}
				fmt.Fprintf(out, "| WORSE %s | %.4g | %.4g | %s | %.4g |\n", w.Key, w.Old, w.New, change, w.Spread)
			}
		}
	}
	if chart != "" {
		fmt.Fprintf(out, "\n![calls per broker CPU-second and p99 latency per system and topology](%s)\n", chart)
	}
}

// loadAtStart is the one-minute load average when the run started.
func (r *peersRun) loadAtStart() float64 {
	var load float64
	_, _ = fmt.Sscan(r.Machine.LoadAvg, &load)
	return load
}

// dateLabel is the run's date for people: "2026-12-01 18:43 UTC".
func (r *peersRun) dateLabel() string {
	t, err := time.Parse(time.RFC3339, r.Date)
	if err != nil {
		return r.Date
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func topologyLabel(topo string) string {
	switch topo {
	case topoSingle:
		return "one instance"
	case topoTwo:
		return "two instances, Redis"
	case topoTLS:
		return "one instance, TLS"
	}
	return topo
}

// coreShares is the median CPU each role used per second of the measured
// window (cores), over the rounds.
func (r *peersRun) coreShares(sys, topo string, conc int) string {
	var broker, client, redis, load []float64
	for _, c := range r.Cells {
		if c.System == sys && c.Topology == topo && c.Conc == conc && c.ElapsedS > 0 {
			broker = append(broker, c.BrokerCPUS/c.ElapsedS)
			client = append(client, c.ClientCPUS/c.ElapsedS)
			redis = append(redis, c.RedisCPUS/c.ElapsedS)
			load = append(load, c.LoadgenCPUS/c.ElapsedS)
		}
	}
	if len(broker) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f, %.2f, %.2f, %.2f", median(broker), median(client), median(redis), median(load))
}
