package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/store"
)

// The async issue's target: an async submit plus a wait for its outcome
// takes at most this many times a synchronous call's p50, on Redis.
const targetAsyncP50xSync = 1.5

// asyncConcurrencies are the load levels of the async issue.
var asyncConcurrencies = []int{1, 64}

// asyncRow is one setup and concurrency: medians over the runs.
type asyncRow struct {
	setup               string
	conc                int
	syncRate, syncP50   float64 // calls/s, ms
	asyncRate, asyncP50 float64 // round trips (submit + wait) per second, ms
	asyncP99, syncP99   float64 // ms
	xP50, xRate         float64 // medians of the per-run ratios async/sync
	// The submit that waits itself (Prefer: respond-async, wait=10).
	oneRate, oneP50, xOneP50 float64
	// The store steps on the async calls' paths, as the broker timed them
	// (tether_call_store_step_seconds, medians over the run, ms): the held
	// create and the finish of submit + GET, the put of the submit that
	// waits; and the floor they put under each, the sync p50 plus its
	// steps as a multiple of the sync p50 (medians of the per-run ratios).
	createMS, finishMS, putMS float64
	xFloorAsync, xFloorOne    float64
	// CPU of every process on the machine per call, µs (load generator,
	// brokers, bridge, Redis), and the async forms' as multiples of the
	// sync call's (medians of the per-run ratios).
	boxSync, boxAsync, boxOne float64
	xBoxAsync, xBoxOne        float64
	// procCPU is the same by process, µs per call: for sync, async and
	// with wait, the load generator and then each of the setup's procs,
	// its broker first (medians over the runs).
	procCPU   [3][]float64
	procNames []string
	// On Redis: a synchronous call entering at a second broker, which
	// crosses Redis to the broker holding the workspace and back; and the
	// submit that waits against it (median of the per-run ratios).
	crossP50, xOneCross float64
}

// BenchmarkAsyncCalls measures an async call's whole round trip, POST
// .../calls with "async":true and then GET /api/v1/calls/{id}?wait=10 on the
// same keep-alive connection until the outcome, against a plain synchronous
// call of the same /api/ping, by the same load generator in the same run,
// through one broker and a bridge; and the same async call submitted with
// Prefer: respond-async, wait=10, whose submit answers the outcome itself
// (one request):
//
//   - memory: the broker alone, on its in-memory bus and store;
//   - redis: the broker on Redis (bus and call store), the bridge on it;
//     also a synchronous call entering at a second broker on the same
//     Redis, which crosses it: the call a Redis deployment's caller makes
//     whenever it reaches an instance that does not hold the workspace,
//     and one that touches Redis as an async call must.
//
// Each run measures the synchronous call, then the async one; the ratios
// are taken per run and their median reported, so that drift on a shared
// machine cancels out. Each run also reads what sets the async calls'
// floor: the store steps on their paths, as the broker timed them (its
// tether_call_store_step_seconds), and the CPU every process on the
// machine spends per call, which bounds the rate at concurrency 64, where
// the machine is saturated.
func BenchmarkAsyncCalls(b *testing.B) {
	bin := tetherBin(b)
	cfg := loadConfigFromEnv(b)
	srv := redistest.Start(b)
	prefix := fmt.Sprintf("bench-async:%d:", time.Now().UnixNano())
	retention := []string{"--call-retention", "1m"}
	mem, memSecret := startBroker(b, bin, retention...)
	memBridge := startBridge(b, bin, mem, memSecret, "bench-async-mem")
	onRedis := func(instance string) []string {
		return append([]string{"--redis", srv.URL(), "--redis-prefix", prefix, "--instance-id", instance}, retention...)
	}
	red, redSecret := startBroker(b, bin, onRedis("async")...)
	redBridge := startBridge(b, bin, red, redSecret, "bench-async-redis")
	red2 := startBrokerWithSecret(b, bin, redSecret, onRedis("async-2")...)
	redToken := mintToken(b, redSecret, auth.RoleCaller, "bench-async-redis")
	crossTgt := target{url: red2.url + "/api/v1/workspaces/bench-async-redis/calls", token: redToken}
	// Every process of a setup, its broker first: their CPU is the
	// machine's per call. The second broker on Redis takes no calls here;
	// it is told of no outcome either, unless it waits for one.
	setups := []struct {
		name      string
		brk       *server
		tgt       target
		procs     []int
		procNames []string // the load generator's and procs'
	}{
		{"memory", mem, target{url: mem.url + "/api/v1/workspaces/bench-async-mem/calls", token: mintToken(b, memSecret, auth.RoleCaller, "bench-async-mem")},
			[]int{mem.pid(), memBridge.pid()}, []string{"load generator", "broker", "bridge"}},
		{"redis", red, target{url: red.url + "/api/v1/workspaces/bench-async-redis/calls", token: redToken},
			[]int{red.pid(), redBridge.pid(), srv.Pid(), red2.pid()}, []string{"load generator", "broker", "bridge", "Redis", "other broker"}},
	}

	fmt.Printf("\nasync calls: %d×(%v warm-up + %v measured) per concurrency, setup and kind; CPUs: %d\n", cfg.runs, cfg.warmup, cfg.measure, runtime.NumCPU())
	var rows []asyncRow
	for _, conc := range asyncConcurrencies {
		for _, st := range setups {
			b.Run(fmt.Sprintf("%s/c=%d", st.name, conc), func(b *testing.B) {
				var sRate, sP50, sP99, aRate, aP50, aP99, xP50, xRate, oRate, oP50, xOP50, cP50, xOC []float64
				var createMS, finishMS, putMS, xFloorA, xFloorO, boxS, boxA, boxO, xBoxA, xBoxO []float64
				var procCPU [3][][]float64 // kind, process, runs
				for k := range procCPU {
					procCPU[k] = make([][]float64, len(st.procNames))
				}
				asyncTgt := st.tgt
				asyncTgt.async = true
				oneTgt := asyncTgt
				oneTgt.submitWait = true
				for run := 1; run <= cfg.runs; run++ {
					s := runLoadOver(b, []target{st.tgt}, conc, cfg, st.procs)
					steps0 := storeSteps(b, st.brk.url)
					a := runLoadOver(b, []target{asyncTgt}, conc, cfg, st.procs)
					steps1 := storeSteps(b, st.brk.url)
					o := runLoadOver(b, []target{oneTgt}, conc, cfg, st.procs)
					steps2 := storeSteps(b, st.brk.url)
					if st.name == "redis" {
						c := runLoadOver(b, []target{crossTgt}, conc, cfg, []int{red2.pid(), st.brk.pid()})
						cP50 = append(cP50, ms(c.quantile(.5)))
						xOC = append(xOC, float64(o.quantile(.5))/float64(c.quantile(.5)))
						fmt.Printf("  %-6s c=%-2d run %d/%d  sync through the other instance %7.0f calls/s p50 %6.3f ms; submit with wait ×%.2f of it\n", st.name, conc, run, cfg.runs, c.rate(), ms(c.quantile(.5)), xOC[len(xOC)-1])
					}
					cr, fi, pu := steps1.median(steps0, store.OpCreateDelivered), steps1.median(steps0, store.OpFinish), steps2.median(steps1, store.OpPut)
					createMS, finishMS, putMS = append(createMS, cr), append(finishMS, fi), append(putMS, pu)
					syncMS := ms(s.quantile(.5))
					xFloorA, xFloorO = append(xFloorA, (syncMS+cr+fi)/syncMS), append(xFloorO, (syncMS+pu)/syncMS)
					bs, ba, bo := s.boxCPUPerCall(), a.boxCPUPerCall(), o.boxCPUPerCall()
					boxS, boxA, boxO = append(boxS, bs), append(boxA, ba), append(boxO, bo)
					for k, r := range []runStats{s, a, o} {
						for i, v := range r.cpuPerCall() {
							procCPU[k][i] = append(procCPU[k][i], v)
						}
					}
					xBoxA, xBoxO = append(xBoxA, ba/bs), append(xBoxO, bo/bs)
					oRate, oP50 = append(oRate, o.rate()), append(oP50, ms(o.quantile(.5)))
					xOP50 = append(xOP50, float64(o.quantile(.5))/float64(s.quantile(.5)))
					sRate, sP50, sP99 = append(sRate, s.rate()), append(sP50, ms(s.quantile(.5))), append(sP99, ms(s.quantile(.99)))
					aRate, aP50, aP99 = append(aRate, a.rate()), append(aP50, ms(a.quantile(.5))), append(aP99, ms(a.quantile(.99)))
					xP50 = append(xP50, float64(a.quantile(.5))/float64(s.quantile(.5)))
					xRate = append(xRate, a.rate()/s.rate())
					fmt.Printf("  %-6s c=%-2d run %d/%d  sync %7.0f calls/s p50 %6.3f ms | async %7.0f round trips/s p50 %6.3f ms (×%.2f) | submit with wait %7.0f/s p50 %6.3f ms (×%.2f) | store steps ms: create %.3f finish %.3f put %.3f\n",
						st.name, conc, run, cfg.runs, s.rate(), ms(s.quantile(.5)), a.rate(), ms(a.quantile(.5)), xP50[len(xP50)-1], o.rate(), ms(o.quantile(.5)), xOP50[len(xOP50)-1], cr, fi, pu)
				}
				row := asyncRow{
					setup: st.name, conc: conc,
					syncRate: median(sRate), syncP50: median(sP50), syncP99: median(sP99),
					asyncRate: median(aRate), asyncP50: median(aP50), asyncP99: median(aP99),
					xP50: median(xP50), xRate: median(xRate),
					oneRate: median(oRate), oneP50: median(oP50), xOneP50: median(xOP50),
					createMS: median(createMS), finishMS: median(finishMS), putMS: median(putMS),
					xFloorAsync: median(xFloorA), xFloorOne: median(xFloorO),
					boxSync: median(boxS), boxAsync: median(boxA), boxOne: median(boxO),
					xBoxAsync: median(xBoxA), xBoxOne: median(xBoxO),
				}
				for k := range procCPU {
					for _, runs := range procCPU[k] {
						row.procCPU[k] = append(row.procCPU[k], median(runs))
					}
				}
				row.procNames = st.procNames
				if len(cP50) > 0 {
					row.crossP50, row.xOneCross = median(cP50), median(xOC)
				}
				rows = append(rows, row)
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(row.asyncP50, "async-p50-ms")
				b.ReportMetric(row.syncP50, "sync-p50-ms")
				b.ReportMetric(row.xP50, "x-sync-p50")
				b.ReportMetric(row.asyncRate, "async-round-trips/s")
			})
		}
	}
	printAsyncTable(os.Stdout, rows, cfg)
}

func printAsyncTable(out io.Writer, rows []asyncRow, cfg loadConfig) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\nasync submit + wait (POST .../calls async, GET /api/v1/calls/{id}?wait=; and the submit with Prefer: respond-async, wait=10 alone) against a sync POST .../calls, /api/ping (%d B payload), HTTP caller → broker → bridge, loopback, %d CPUs\n", len(pingPayload), runtime.NumCPU())
	fmt.Fprintf(out, "median of %d runs of %v (after %v warm-up); ×sync: median of the per-run ratios async/sync (each run: sync, then async); broker CPU per call over the measured window\n\n", cfg.runs, cfg.measure, cfg.warmup)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tconc\t sync calls/s\tp50 ms\tp99 ms\t async round trips/s\tp50 ms\tp99 ms\t ×sync p50\t×sync rate\t submit with wait/s\tp50 ms\t×sync p50\t broker µs/call sync\tasync\twith wait\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t %.0f\t%.3f\t%.3f\t %.0f\t%.3f\t%.3f\t %.2f\t%.2f\t %.0f\t%.3f\t%.2f\t %.1f\t%.1f\t%.1f\t\n",
			r.setup, r.conc, r.syncRate, r.syncP50, r.syncP99, r.asyncRate, r.asyncP50, r.asyncP99, r.xP50, r.xRate, r.oneRate, r.oneP50, r.xOneP50, r.procCPU[0][1], r.procCPU[1][1], r.procCPU[2][1])
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	for _, r := range rows {
		if r.setup != "redis" {
			continue
		}
		fmt.Fprintf(out, "target redis c=%d: async p50 ×%.2f of sync, want ≤ %.1f: %s (one request with Prefer wait: ×%.2f)\n", r.conc, r.xP50, targetAsyncP50xSync, verdict(r.xP50 <= targetAsyncP50xSync), r.xOneP50)
		if r.conc == 1 {
			fmt.Fprintf(out, "  its store steps, as the broker timed them (medians): create %.3f ms + finish %.3f ms; the sync p50 plus them is ×%.2f of it before anything else (with wait: put %.3f ms, ×%.2f)\n",
				r.createMS, r.finishMS, r.xFloorAsync, r.putMS, r.xFloorOne)
		}
		fmt.Fprintf(out, "  CPU per call of every process on the machine: sync %.0f µs, async %.0f µs (×%.2f), with wait %.0f µs (×%.2f)\n",
			r.boxSync, r.boxAsync, r.xBoxAsync, r.boxOne, r.xBoxOne)
		for k, kind := range []string{"sync", "async", "with wait"} {
			var parts []string
			for i, name := range r.procNames {
				parts = append(parts, fmt.Sprintf("%s %.1f", name, r.procCPU[k][i]))
			}
			fmt.Fprintf(out, "    %-9s µs per call: %s\n", kind, strings.Join(parts, ", "))
		}
		if r.crossP50 > 0 {
			fmt.Fprintf(out, "  a sync call through the other instance (crossing Redis): p50 %.3f ms, the submit with wait ×%.2f of it\n", r.crossP50, r.xOneCross)
		}
	}
	fmt.Fprintln(out)
}

// stepTotals are a broker's tether_call_store_step_seconds histograms, by
// operation: the cumulative count at each bucket's upper bound (seconds),
// +Inf last.
type stepTotals map[string][]stepBucket

type stepBucket struct{ le, count float64 }

// storeSteps reads the store step histograms from the /metrics of the
// broker at url.
func storeSteps(tb testing.TB, url string) stepTotals {
	tb.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		tb.Fatalf("reading broker metrics: %v", err)
	}
	defer res.Body.Close()
	out := stepTotals{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		// tether_call_store_step_seconds_bucket{op="put",le="0.0001"} 12
		rest, ok := strings.CutPrefix(sc.Text(), `tether_call_store_step_seconds_bucket{op="`)
		if !ok {
			continue
		}
		op, rest, ok1 := strings.Cut(rest, `",le="`)
		le, value, ok2 := strings.Cut(rest, `"} `)
		bound, err1 := strconv.ParseFloat(le, 64) // "+Inf" too
		n, err2 := strconv.ParseFloat(value, 64)
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			tb.Fatalf("broker metrics: unreadable line %q", sc.Text())
		}
		out[op] = append(out[op], stepBucket{bound, n})
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("reading broker metrics: %v", err)
	}
	return out
}

// median is the median time in ms of the op steps taken between before
// and t, interpolated within its bucket as Prometheus' histogram_quantile
// does (0 when none was taken).
func (t stepTotals) median(before stepTotals, op string) float64 {
	now, was := t[op], before[op]
	count := func(i int) float64 {
		if i < len(was) {
			return now[i].count - was[i].count
		}
		return now[i].count
	}
	if len(now) == 0 || count(len(now)-1) <= 0 {
		return 0
	}
	half := count(len(now)-1) / 2
	lower, below := 0.0, 0.0
	for i := range now {
		c := count(i)
		if c < half {
			lower, below = now[i].le, c
			continue
		}
		if math.IsInf(now[i].le, 1) {
			break
		}
		return (lower + (now[i].le-lower)*(half-below)/(c-below)) * 1e3
	}
	return lower * 1e3
}
