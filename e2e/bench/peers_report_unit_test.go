package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// These tests check the report of BenchmarkPeers on made-up runs: they need
// no process and run with the other tests.

// fakePeersRun is a two-round run of tether and node on one instance at c=1.
func fakePeersRun() *peersRun {
	r := &peersRun{Date: "2026-12-01T18:43:00Z", Full: true,
		Config: peersShape{Rounds: 2, MeasureS: 3, Systems: []string{sysTether, sysNode}, Topologies: []string{topoSingle}, Concs: []int{1}, IdleConns: 100}}
	cell := func(sys string, round int, rate, cpuS, p99 float64) peersCell {
		return peersCell{System: sys, Topology: topoSingle, Conc: 1, Round: round, Calls: int(rate * 3), ElapsedS: 3, CallsPerS: rate,
			P50Ms: p99 / 3, P99Ms: p99, BrokerCPUS: cpuS, CallsPerBrokerCPUS: rate * 3 / cpuS, BrokerPeakRSSMB: 40}
	}
	r.Cells = []peersCell{
		cell(sysTether, 1, 6000, 1.5, 0.4), cell(sysNode, 1, 5000, 1.5, 0.5),
		cell(sysTether, 2, 3000, 1.0, 0.8), cell(sysNode, 2, 2000, 1.0, 1.6),
	}
	g := 1.0
	h := 20.0
	r.Idle = []peersIdle{{System: sysTether, Round: 1, KBPerConn: 30, GoroutinesPerConn: &g, HeapKBPerConn: &h}, {System: sysNode, Round: 1, KBPerConn: 20}}
	r.summarize()
	return r
}

func TestPeersRatiosAreTakenWithinEachRound(t *testing.T) {
	r := fakePeersRun()
	// Round 1: 6000/5000 = 1.2; round 2: 3000/2000 = 1.5. The ratio of the
	// medians (4500/3500) would be 1.29; the median of the ratios is 1.35.
	f := r.figure(sysTether+"/"+sysNode, topoSingle, 1, metricRate)
	if f == nil {
		t.Fatal("no tether/node calls/s ratio")
	}
	if math.Abs(f.Median-1.35) > 1e-9 || math.Abs(f.Spread-0.3) > 1e-9 {
		t.Errorf("tether/node calls/s: median %v spread %v, want 1.35 and 0.3 (samples %v)", f.Median, f.Spread, f.Samples)
	}
	// A cell whose brokers used less CPU than the clock shows has no
	// calls per CPU-second; the other rounds still count.
	r.Cells[3].CallsPerBrokerCPUS = 0
	r.summarize()
	if f := r.figure(sysNode, topoSingle, 1, metricCPU); f == nil || len(f.Samples) != 1 {
		t.Errorf("node calls per CPU-s with one unmeasurable round: %+v, want one sample", f)
	}
	if f := r.figure(sysTether+"/"+sysNode, topoSingle, 1, metricCPU); f == nil || len(f.Samples) != 1 || math.Abs(f.Median-1.2) > 1e-9 {
		t.Errorf("tether/node calls per CPU-s with one unmeasurable round: %+v, want round 1's 1.2 alone", f)
	}
	if f := r.figure(sysTether+"/"+sysNode, topoIdle, 0, metricIdleKB); f == nil || f.Median != 1.5 {
		t.Errorf("tether/node idle KB per connection: %+v, want 1.5", f)
	}
	if f := r.figure(sysTether, topoIdle, 0, metricIdleGoroutines); f == nil || f.Median != 1 {
		t.Errorf("tether idle goroutines per connection: %+v, want 1", f)
	}
}

func TestPeersBaselineFlagsOnlyFiguresWorseThanTheSpread(t *testing.T) {
	old := peersRun{Date: "old", Figures: []figure{
		newFigure(sysTether, topoSingle, 64, metricCPU, []float64{20000, 21000}), // spread 1000
		newFigure(sysTether, topoSingle, 64, metricP99, []float64{5, 5.2}),       // spread 0.2
		newFigure(sysNode, topoSingle, 64, metricP99, []float64{6, 6.1}),
		newFigure(sysTether, topoIdle, 0, metricIdleKB, []float64{30, 30}),
	}}
	now := []figure{
		newFigure(sysTether, topoSingle, 64, metricCPU, []float64{19900, 20100}), // lower, within the spread
		newFigure(sysTether, topoSingle, 64, metricP99, []float64{6, 6.2}),       // 1 ms worse, beyond 0.2
		newFigure(sysNode, topoSingle, 64, metricP99, []float64{3, 3.1}),         // better
		newFigure(sysTether, topoIdle, 0, metricIdleKB, []float64{25, 40}),       // median 32.5: worse by 2.5, spread 15
		newFigure(sysPython, topoSingle, 64, metricCPU, []float64{100}),          // not in the baseline
	}
	cmp := compareFigures("old.json", old, now)
	if cmp.Compared != 4 {
		t.Errorf("compared %d figures, want the 4 found in both", cmp.Compared)
	}
	if len(cmp.Worse) != 1 || cmp.Worse[0].Key != figureKey(sysTether, topoSingle, 64, metricP99) {
		t.Fatalf("flagged %+v, want only tether's p99 at c=64", cmp.Worse)
	}
	if w := cmp.Worse[0]; w.Change == nil || math.Abs(*w.Change-1.0/5.1) > 1e-9 || math.Abs(w.Spread-0.2) > 1e-9 {
		t.Errorf("flagged figure %+v: want change 1/5.1 and spread 0.2", w)
	}
	// The other way round, only node's p99 (3.05 → 6.05 ms) got worse.
	if cmp := compareFigures("x", peersRun{Figures: now}, old.Figures); len(cmp.Worse) != 1 || cmp.Worse[0].Key != figureKey(sysNode, topoSingle, 64, metricP99) {
		t.Errorf("reverse comparison flagged %+v, want only node's p99", cmp.Worse)
	}
}

func TestPeersChartIsWellFormedSVGWithABarPerSystem(t *testing.T) {
	svg := peersChart(fakePeersRun())
	dec := xml.NewDecoder(bytes.NewReader(svg))
	rects := map[string]int{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "rect" {
			for _, a := range el.Attr {
				if a.Name.Local == "fill" {
					rects[a.Value]++
				}
			}
		}
	}
	// Per system: one legend swatch and one bar in each of the two panels.
	for _, sys := range []string{sysTether, sysNode} {
		if n := rects[chartColors[sys]]; n != 3 {
			t.Errorf("%s: %d rects in its colour, want 3 (legend and a bar per panel)", sys, n)
		}
	}
}

func TestPeersReportFillsOnlyTheResultsSection(t *testing.T) {
	var section bytes.Buffer
	r := fakePeersRun()
	r.Command = "make bench-peers"
	r.writeMarkdown(&section, docChart)
	for _, want := range []string{"| tether | one instance | 1 | 4500 (3000–6000) |", "| tether / node socket.io | one instance | 1 | ", "benchmarks-peers.svg", "`make bench-peers`"} {
		if !strings.Contains(section.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, section.String())
		}
	}
	doc := []byte("# Benchmarks\n\nHow it works.\n\n" + docBegin + "\nold figures\n" + docEnd + "\n\n## After\n")
	got := string(fillSection(doc, []byte("new figures\n")))
	want := "# Benchmarks\n\nHow it works.\n\n" + docBegin + "\n\nnew figures\n\n" + docEnd + "\n## After\n"
	if got != want {
		t.Errorf("filled document:\n%s\nwant:\n%s", got, want)
	}
	if got := string(fillSection([]byte("# Benchmarks\n"), []byte("figures\n"))); !strings.HasSuffix(got, docBegin+"\n\nfigures\n\n"+docEnd+"\n") {
		t.Errorf("a document without the markers gets them appended; got:\n%s", got)
	}
}

// TestPeersReportSaysWhichCallsAPeerFailed: calls a peer answered with a
// failure are named with their cell and the first error.
func TestPeersReportSaysWhichCallsAPeerFailed(t *testing.T) {
	r := fakePeersRun()
	r.Cells[3].FailedCalls, r.Cells[3].FirstFailure = 2, "call failed: timeout: operation has timed out"
	var section bytes.Buffer
	r.writeMarkdown(&section, docChart)
	want := `A peer answered calls with a failure (left out of its figures): node socket.io, one instance, c=1, round 2: 2, the first "call failed: timeout: operation has timed out".`
	if !strings.Contains(section.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, section.String())
	}
}

// TestLoadCountsAPeersFailedCallsAndGoesOn: a peer's failed answer is
// counted, its successes measured; the run goes on.
func TestLoadCountsAPeersFailedCallsAndGoesOn(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1)%3 == 0 {
			_, _ = w.Write([]byte(`{"correlation_id":"c","success":false,"error":"timeout","message":"operation has timed out"}`))
			return
		}
		_, _ = w.Write([]byte(`{"correlation_id":"c","success":true,"result":` + string(pingPayload) + `}`))
	}))
	defer srv.Close()
	s := runLoadOver(t, []target{{url: srv.URL + "/api/v1/workspaces/w/calls", peer: true}}, 2, loadConfig{measure: 200 * time.Millisecond, runs: 1}, nil)
	if s.failed == 0 || len(s.lat) == 0 || !strings.Contains(s.firstFailure, "operation has timed out") {
		t.Fatalf("%d failed (first %q), %d measured", s.failed, s.firstFailure, len(s.lat))
	}
	if ratio := float64(s.failed) / float64(s.failed+len(s.lat)); ratio < 0.2 || ratio > 0.45 {
		t.Fatalf("%d of %d calls counted failed, want about a third", s.failed, s.failed+len(s.lat))
	}
}

func TestLoadHoldsItsGarbageCollectionWhileMeasuring(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	gogc := func() int64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	var during atomic.Int64
	during.Store(77)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		during.Store(gogc()) // the server runs in the load generator's process
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"correlation_id":"c","success":true,"result":` + string(pingPayload) + `}`))
	}))
	defer srv.Close()
	runLoadOver(t, []target{{url: srv.URL + "/api/v1/workspaces/w/calls"}}, 2, loadConfig{measure: 100 * time.Millisecond, runs: 1}, nil)
	if got := during.Load(); got == 77 {
		t.Errorf("GOGC during the load: %d, want collection held", got)
	}
	if got := gogc(); got != 77 {
		t.Errorf("GOGC after the load: %d, want 77 back", got)
	}
}

// The store step median is read from the broker's histogram between two
// scrapes, interpolated within its bucket: 10 steps before, then 4 more in
// (0.1, 0.2] ms and 4 in (0.2, 0.3] ms: the median is at the end of the
// first of those buckets.
func TestStoreStepMedianInterpolatesWithinItsBucket(t *testing.T) {
	before := stepTotals{"put": {{0.0001, 10}, {0.0002, 10}, {0.0003, 10}, {math.Inf(1), 10}}}
	after := stepTotals{"put": {{0.0001, 10}, {0.0002, 14}, {0.0003, 18}, {math.Inf(1), 18}}}
	if got := after.median(before, "put"); math.Abs(got-0.2) > 1e-9 {
		t.Fatalf("median %.6f ms, want 0.2", got)
	}
	after["put"][1].count = 12 // 2 in (0.1, 0.2], 6 in (0.2, 0.3]: 2 of those 6 below the median
	if got := after.median(before, "put"); math.Abs(got-(0.2+0.1*2/6)) > 1e-9 {
		t.Fatalf("median %.6f ms, want %.6f", got, 0.2+0.1*2/6)
	}
	if got := after.median(before, "create"); got != 0 {
		t.Fatalf("median of steps never taken: %v", got)
	}
	if got := before.median(before, "put"); got != 0 {
		t.Fatalf("median with no step between the scrapes: %v", got)
	}
}
