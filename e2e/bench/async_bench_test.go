package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/bus/redistest"
)

// The async issue's target: an async submit plus a wait for its outcome
// takes at most this many times a synchronous call's p50, on Redis.
const targetAsyncP50xSync = 1.5

// asyncConcurrencies are the load levels of the async issue.
var asyncConcurrencies = []int{1, 64}

// asyncRow is one setup and concurrency: medians over the runs.
type asyncRow struct {
	setup                         string
	conc                          int
	syncRate, syncP50             float64 // calls/s, ms
	asyncRate, asyncP50           float64 // round trips (submit + wait) per second, ms
	asyncP99, syncP99             float64 // ms
	xP50, xRate                   float64 // medians of the per-run ratios async/sync
	brokerCPUSync, brokerCPUAsync float64 // µs of broker CPU per call
	// The submit that waits itself (Prefer: respond-async, wait=10).
	oneRate, oneP50, xOneP50, brokerCPUOne float64
	// On Redis at c=1: the p50 of one Redis round trip (PING, go-redis)
	// in the same runs, and the floor it puts under an async call that
	// must be recorded before it is answered: sync p50 plus that round
	// trip, as a multiple of the sync p50 (medians of the per-run ratios).
	redisRTT, xFloor float64
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
// machine cancels out.
func BenchmarkAsyncCalls(b *testing.B) {
	bin := tetherBin(b)
	cfg := loadConfigFromEnv(b)
	srv := redistest.Start(b)
	prefix := fmt.Sprintf("bench-async:%d:", time.Now().UnixNano())
	retention := []string{"--call-retention", "1m"}
	mem, memSecret := startBroker(b, bin, retention...)
	startBridge(b, bin, mem, memSecret, "bench-async-mem")
	onRedis := func(instance string) []string {
		return append([]string{"--redis", srv.URL(), "--redis-prefix", prefix, "--instance-id", instance}, retention...)
	}
	red, redSecret := startBroker(b, bin, onRedis("async")...)
	startBridge(b, bin, red, redSecret, "bench-async-redis")
	red2 := startBrokerWithSecret(b, bin, redSecret, onRedis("async-2")...)
	redToken := mintToken(b, redSecret, broker.RoleCaller, "bench-async-redis")
	crossTgt := target{url: red2.url + "/api/v1/workspaces/bench-async-redis/calls", token: redToken}
	setups := []struct {
		name string
		brk  *server
		tgt  target
	}{
		{"memory", mem, target{url: mem.url + "/api/v1/workspaces/bench-async-mem/calls", token: mintToken(b, memSecret, broker.RoleCaller, "bench-async-mem")}},
		{"redis", red, target{url: red.url + "/api/v1/workspaces/bench-async-redis/calls", token: redToken}},
	}

	fmt.Printf("\nasync calls: %d×(%v warm-up + %v measured) per concurrency, setup and kind; CPUs: %d\n", cfg.runs, cfg.warmup, cfg.measure, runtime.NumCPU())
	var rows []asyncRow
	for _, conc := range asyncConcurrencies {
		for _, st := range setups {
			b.Run(fmt.Sprintf("%s/c=%d", st.name, conc), func(b *testing.B) {
				var sRate, sP50, sP99, aRate, aP50, aP99, xP50, xRate, cpuS, cpuA, oRate, oP50, xOP50, cpuO, rtt, xFloor, cP50, xOC []float64
				asyncTgt := st.tgt
				asyncTgt.async = true
				oneTgt := asyncTgt
				oneTgt.submitWait = true
				for run := 1; run <= cfg.runs; run++ {
					s := runLoadOver(b, []target{st.tgt}, conc, cfg, []int{st.brk.pid()})
					if st.name == "redis" && conc == 1 {
						r := redisPingP50(b, srv.URL(), st.tgt)
						rtt = append(rtt, ms(r))
						xFloor = append(xFloor, float64(s.quantile(.5)+r)/float64(s.quantile(.5)))
					}
					a := runLoadOver(b, []target{asyncTgt}, conc, cfg, []int{st.brk.pid()})
					o := runLoadOver(b, []target{oneTgt}, conc, cfg, []int{st.brk.pid()})
					if st.name == "redis" {
						c := runLoadOver(b, []target{crossTgt}, conc, cfg, []int{red2.pid(), st.brk.pid()})
						cP50 = append(cP50, ms(c.quantile(.5)))
						xOC = append(xOC, float64(o.quantile(.5))/float64(c.quantile(.5)))
						fmt.Printf("  %-6s c=%-2d run %d/%d  sync through the other instance %7.0f calls/s p50 %6.3f ms; submit with wait ×%.2f of it\n", st.name, conc, run, cfg.runs, c.rate(), ms(c.quantile(.5)), xOC[len(xOC)-1])
					}
					oRate, oP50 = append(oRate, o.rate()), append(oP50, ms(o.quantile(.5)))
					xOP50 = append(xOP50, float64(o.quantile(.5))/float64(s.quantile(.5)))
					cpuO = append(cpuO, us(o.watchCPU[0])/float64(len(o.lat)))
					sRate, sP50, sP99 = append(sRate, s.rate()), append(sP50, ms(s.quantile(.5))), append(sP99, ms(s.quantile(.99)))
					aRate, aP50, aP99 = append(aRate, a.rate()), append(aP50, ms(a.quantile(.5))), append(aP99, ms(a.quantile(.99)))
					xP50 = append(xP50, float64(a.quantile(.5))/float64(s.quantile(.5)))
					xRate = append(xRate, a.rate()/s.rate())
					cpuS = append(cpuS, us(s.watchCPU[0])/float64(len(s.lat)))
					cpuA = append(cpuA, us(a.watchCPU[0])/float64(len(a.lat)))
					fmt.Printf("  %-6s c=%-2d run %d/%d  sync %7.0f calls/s p50 %6.3f ms | async %7.0f round trips/s p50 %6.3f ms (×%.2f) | submit with wait %7.0f/s p50 %6.3f ms (×%.2f)\n",
						st.name, conc, run, cfg.runs, s.rate(), ms(s.quantile(.5)), a.rate(), ms(a.quantile(.5)), xP50[len(xP50)-1], o.rate(), ms(o.quantile(.5)), xOP50[len(xOP50)-1])
				}
				row := asyncRow{
					setup: st.name, conc: conc,
					syncRate: median(sRate), syncP50: median(sP50), syncP99: median(sP99),
					asyncRate: median(aRate), asyncP50: median(aP50), asyncP99: median(aP99),
					xP50: median(xP50), xRate: median(xRate),
					brokerCPUSync: median(cpuS), brokerCPUAsync: median(cpuA),
					oneRate: median(oRate), oneP50: median(oP50), xOneP50: median(xOP50), brokerCPUOne: median(cpuO),
				}
				if len(rtt) > 0 {
					row.redisRTT, row.xFloor = median(rtt), median(xFloor)
				}
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
			r.setup, r.conc, r.syncRate, r.syncP50, r.syncP99, r.asyncRate, r.asyncP50, r.asyncP99, r.xP50, r.xRate, r.oneRate, r.oneP50, r.xOneP50, r.brokerCPUSync, r.brokerCPUAsync, r.brokerCPUOne)
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	for _, r := range rows {
		if r.setup == "redis" {
			fmt.Fprintf(out, "target redis c=%d: async p50 ×%.2f of sync, want ≤ %.1f: %s (one request with Prefer wait: ×%.2f)", r.conc, r.xP50, targetAsyncP50xSync, verdict(r.xP50 <= targetAsyncP50xSync), r.xOneP50)
			if r.redisRTT > 0 {
				fmt.Fprintf(out, "; one Redis round trip %.3f ms p50: an outcome stored before it is answered costs at least ×%.2f", r.redisRTT, r.xFloor)
			}
			if r.crossP50 > 0 {
				fmt.Fprintf(out, "; a sync call through the other instance (crossing Redis): p50 %.3f ms, the submit with wait ×%.2f of it", r.crossP50, r.xOneCross)
			}
			fmt.Fprintln(out)
		}
	}
	fmt.Fprintln(out)
}

// redisPingP50 is the p50 of 2000 PINGs to the Redis at url, one at a
// time, through go-redis, each right after a synchronous call to tgt (on
// one keep-alive connection, as the load generator makes it): one Redis
// round trip as an async call's store step makes it, after its client's
// answer, with Redis idle since the previous one. Back-to-back PINGs
// measure less on a virtual machine (0.011 ms against 0.05-0.07 ms here,
// 2026-12-03): the processes never go idle between them, and waking an
// idle one is most of a round trip's cost at concurrency 1.
func redisPingP50(tb testing.TB, url string, tgt target) time.Duration {
	tb.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	host, req, err := callRequest(tgt)
	if err != nil {
		tb.Fatal(err)
	}
	hc, err := dialCaller(host)
	if err != nil {
		tb.Fatal(err)
	}
	defer hc.close()
	ctx := context.Background()
	lat := make([]time.Duration, 0, 2000)
	for i := range 2200 {
		if err := hc.call(req); err != nil {
			tb.Fatalf("call before PING: %v", err)
		}
		t0 := time.Now()
		if err := client.Ping(ctx).Err(); err != nil {
			tb.Fatalf("PING: %v", err)
		}
		if i >= 200 {
			lat = append(lat, time.Since(t0))
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2]
}
