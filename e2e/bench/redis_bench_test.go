package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus/redistest"
)

// Targets of the Redis issue for calls that cross instances.
const (
	targetCrossRate64  = 12000 // calls/s at concurrency 64
	targetCrossP99At64 = 15 * time.Millisecond
	targetCrossP50xRaw = 3.0 // p50 at concurrency 1, as a multiple of one raw Redis round trip (two hops)
)

// redisSetups are the configurations BenchmarkRedisRelay compares, in the
// order each run measures them.
var redisSetups = []string{"memory", "redis", "cross"}

// redisSetupsFromEnv narrows the setups to BENCH_REDIS_SETUPS (a comma
// separated subset, for profiling one of them); the ratios need all three.
func redisSetupsFromEnv() []string {
	v := os.Getenv("BENCH_REDIS_SETUPS")
	if v == "" {
		return redisSetups
	}
	return strings.Split(v, ",")
}

// redisRow is one concurrency's result: medians over the runs.
type redisRow struct {
	conc int
	// calls/s, p50 ms, p99 ms by setup, plus "raw": the Redis round trip.
	rate, p50, p99 map[string]float64
	// medians of the per-run ratios
	xRateRedis, xRateCross float64 // calls/s against memory
	xP50Raw                float64 // cross p50 / raw round trip p50
	// CPU µs per call, over warm-up and measurement
	memBrokerCPU, memBridgeCPU               float64
	entryCPU, ownerCPU, crossBridgeCPU, load float64
}

// BenchmarkRedisRelay measures /api/ping from an HTTP caller through a
// broker and a bridge and back, as BenchmarkRelay does, on three setups:
//
//   - memory: one broker on its in-memory bus;
//   - redis: one broker on Redis (the call goes broker → Redis → the same
//     broker, the answer likewise);
//   - cross: two brokers on Redis, the bridge on one and every call sent to
//     the other, so each call and each answer crosses instances.
//
// The baseline, measured in the same run by the same process, is the raw
// Redis round trip: PUBLISH to a channel, a subscriber that PUBLISHes it back
// to a second channel, the first side receiving it — two Redis hops, the
// least a call that crosses instances must take. Runs alternate the setups
// so that drift on a shared machine hits all alike.
func BenchmarkRedisRelay(b *testing.B) {
	bin := tetherBin(b)
	cfg := loadConfigFromEnv(b)
	srv := redistest.Start(b)
	prefix := fmt.Sprintf("bench:%d:", time.Now().UnixNano())
	onRedis := []string{"--redis", srv.URL(), "--redis-prefix", prefix}

	mem, memSecret := startBroker(b, bin)
	memBridge := startBridge(b, bin, mem, memSecret, "bench-mem")
	owner, ownerSecret := startBroker(b, bin, append(onRedis, "--instance-id", "owner")...)
	ownerBridge := startBridge(b, bin, owner, ownerSecret, "bench-redis")
	entry, entrySecret := startBroker(b, bin, append(onRedis, "--instance-id", "entry")...)
	targets := map[string]target{
		"memory": {url: mem.url + "/api/v1/workspaces/bench-mem/calls", token: mintToken(b, memSecret, auth.RoleCaller, "bench-mem")},
		"redis":  {url: owner.url + "/api/v1/workspaces/bench-redis/calls", token: mintToken(b, ownerSecret, auth.RoleCaller, "bench-redis")},
		"cross":  {url: entry.url + "/api/v1/workspaces/bench-redis/calls", token: mintToken(b, entrySecret, auth.RoleCaller, "bench-redis")},
	}
	raw := newRawRoundTrip(b, srv.URL(), prefix+"raw:")

	fmt.Printf("\nredis relay: %d×(%v warm-up + %v measured) per concurrency and setup; CPUs: %d\n", cfg.runs, cfg.warmup, cfg.measure, runtime.NumCPU())
	var rows []redisRow
	for _, conc := range relayConcurrencies {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			samples := map[string][3][]float64{} // setup -> rate, p50, p99
			var xRateRedis, xRateCross, xP50Raw []float64
			var memBrokerCPU, memBridgeCPU, entryCPU, ownerCPU, crossBridgeCPU, loadCPU []float64
			perCall := func(used time.Duration, s runStats) float64 {
				return us(used) / (s.rate() * (cfg.warmup + cfg.measure).Seconds())
			}
			add := func(name string, s runStats) {
				v := samples[name]
				v[0], v[1], v[2] = append(v[0], s.rate()), append(v[1], ms(s.quantile(.5))), append(v[2], ms(s.quantile(.99)))
				samples[name] = v
			}
			for run := 1; run <= cfg.runs; run++ {
				r := raw.run(b, conc, cfg)
				add("raw", r)
				got := map[string]runStats{}
				for _, name := range redisSetupsFromEnv() {
					pids := []int{mem.pid(), memBridge.pid(), entry.pid(), owner.pid(), ownerBridge.pid()}
					cpu0 := make([]time.Duration, len(pids))
					for i, pid := range pids {
						cpu0[i] = cpuTime(pid)
					}
					s := runLoad(b, targets[name], conc, cfg)
					got[name] = s
					add(name, s)
					used := func(i int) time.Duration { return cpuTime(pids[i]) - cpu0[i] }
					switch name {
					case "memory":
						memBrokerCPU, memBridgeCPU = append(memBrokerCPU, perCall(used(0), s)), append(memBridgeCPU, perCall(used(1), s))
					case "cross":
						entryCPU, ownerCPU = append(entryCPU, perCall(used(2), s)), append(ownerCPU, perCall(used(3), s))
						crossBridgeCPU = append(crossBridgeCPU, perCall(used(4), s))
						loadCPU = append(loadCPU, us(s.loadCPU)/float64(len(s.lat)))
					}
				}
				xRateRedis = append(xRateRedis, got["redis"].rate()/got["memory"].rate())
				xRateCross = append(xRateCross, got["cross"].rate()/got["memory"].rate())
				xP50Raw = append(xP50Raw, float64(got["cross"].quantile(.5))/float64(r.quantile(.5)))
				fmt.Printf("  c=%-2d run %d/%d  raw %7.0f/s p50 %6.3f ms |", conc, run, cfg.runs, r.rate(), ms(r.quantile(.5)))
				for _, name := range redisSetups {
					s := got[name]
					fmt.Printf(" %s %6.0f/s p50 %6.3f p99 %6.3f ms |", name, s.rate(), ms(s.quantile(.5)), ms(s.quantile(.99)))
				}
				fmt.Println()
			}
			row := redisRow{conc: conc, rate: map[string]float64{}, p50: map[string]float64{}, p99: map[string]float64{},
				xRateRedis: median(xRateRedis), xRateCross: median(xRateCross), xP50Raw: median(xP50Raw),
				memBrokerCPU: median(memBrokerCPU), memBridgeCPU: median(memBridgeCPU),
				entryCPU: median(entryCPU), ownerCPU: median(ownerCPU), crossBridgeCPU: median(crossBridgeCPU), load: median(loadCPU)}
			for name, v := range samples {
				row.rate[name], row.p50[name], row.p99[name] = median(v[0]), median(v[1]), median(v[2])
			}
			rows = append(rows, row)
			b.ReportMetric(0, "ns/op")
			for _, name := range redisSetups {
				b.ReportMetric(row.rate[name], name+"-calls/s")
				b.ReportMetric(row.p50[name], name+"-p50-ms")
				b.ReportMetric(row.p99[name], name+"-p99-ms")
			}
			b.ReportMetric(row.p50["raw"], "raw-rtt-p50-ms")
			b.ReportMetric(row.xP50Raw, "cross-p50/raw")
		})
	}
	printRedisTable(os.Stdout, rows, cfg)
}

func printRedisTable(out io.Writer, rows []redisRow, cfg loadConfig) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\n/api/ping (%d B payload), HTTP caller → broker(s) → bridge → back, loopback, %d CPUs; median of %d runs of %v (after %v warm-up)\n",
		len(pingPayload), runtime.NumCPU(), cfg.runs, cfg.measure, cfg.warmup)
	fmt.Fprintf(out, "memory: one broker, in-memory bus; redis: one broker on Redis; cross: two brokers on Redis, every call crossing instances\n")
	fmt.Fprintf(out, "raw: Redis PUBLISH → subscriber → PUBLISH → subscriber round trip (two hops), go-redis, same run; ratios are medians of per-run ratios\n\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\t memory calls/s\tp50 ms\tp99 ms\t redis calls/s\tp50 ms\tp99 ms\t cross calls/s\tp50 ms\tp99 ms\t raw rtt/s\tp50 ms\tp99 ms\t redis/memory\tcross/memory\tcross p50/raw\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t", r.conc)
		for _, name := range append(slices.Clone(redisSetups), "raw") {
			fmt.Fprintf(tw, " %.0f\t%.3f\t%.3f\t", r.rate[name], r.p50[name], r.p99[name])
		}
		fmt.Fprintf(tw, " %.2f\t%.2f\t%.2f\t\n", r.xRateRedis, r.xRateCross, r.xP50Raw)
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "\nCPU µs per call: memory (broker, bridge); cross (entry broker, owner broker, bridge, load generator)\n\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\t memory broker\tbridge\t cross entry\towner\tbridge\tloadgen\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t %.1f\t%.1f\t %.1f\t%.1f\t%.1f\t%.1f\t\n", r.conc, r.memBrokerCPU, r.memBridgeCPU, r.entryCPU, r.ownerCPU, r.crossBridgeCPU, r.load)
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	for _, r := range rows {
		switch r.conc {
		case 1:
			fmt.Fprintf(out, "target cross c=1:  p50 %.3f ms = %.2f× the raw round trip (%.3f ms), want ≤ %.0f×: %s\n",
				r.p50["cross"], r.xP50Raw, r.p50["raw"], targetCrossP50xRaw, verdict(r.xP50Raw <= targetCrossP50xRaw))
		case 64:
			fmt.Fprintf(out, "target cross c=64: %.0f calls/s, want ≥ %d: %s\n", r.rate["cross"], targetCrossRate64, verdict(r.rate["cross"] >= targetCrossRate64))
			fmt.Fprintf(out, "target cross c=64: p99 %.3f ms, want ≤ %.3f ms: %s\n", r.p99["cross"], ms(targetCrossP99At64), verdict(r.p99["cross"] <= ms(targetCrossP99At64)))
		}
	}
	fmt.Fprintln(out)
}

// rawRoundTrip is the baseline: bare go-redis, no tether. A caller
// publishes a numbered message on one channel; a responder subscribed to it
// publishes it back on a second channel, to which the caller is subscribed.
type rawRoundTrip struct {
	pub      *redis.Client
	req, rep string

	mu      sync.Mutex
	seq     uint64
	waiting map[string]chan struct{}
}

func newRawRoundTrip(tb testing.TB, url, prefix string) *rawRoundTrip {
	tb.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatal(err)
	}
	// Three clients, as in a cross-instance call: the caller's, the
	// responder's, and their pub/sub connections.
	caller, responder := redis.NewClient(opts), redis.NewClient(opts)
	r := &rawRoundTrip{pub: caller, req: prefix + "req", rep: prefix + "rep", waiting: map[string]chan struct{}{}}
	ctx := context.Background()
	reqSub, repSub := responder.Subscribe(ctx, r.req), caller.Subscribe(ctx, r.rep)
	for _, s := range []*redis.PubSub{reqSub, repSub} {
		if _, err := s.Receive(ctx); err != nil { // the subscription's confirmation
			tb.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	// The responder hands messages to publishers, as a broker hands calls
	// on: its receive loop never waits for a publish.
	echo := make(chan string, 1024)
	wg.Go(func() {
		defer close(echo)
		for {
			m, err := reqSub.ReceiveMessage(ctx)
			if err != nil {
				return
			}
			echo <- m.Payload
		}
	})
	for range 8 {
		wg.Go(func() {
			for p := range echo {
				responder.Publish(ctx, r.rep, p)
			}
		})
	}
	wg.Go(func() {
		for {
			m, err := repSub.ReceiveMessage(ctx)
			if err != nil {
				return
			}
			r.mu.Lock()
			ch := r.waiting[m.Payload]
			delete(r.waiting, m.Payload)
			r.mu.Unlock()
			if ch != nil {
				ch <- struct{}{}
			}
		}
	})
	tb.Cleanup(func() {
		_ = reqSub.Close()
		_ = repSub.Close()
		wg.Wait()
		_ = caller.Close()
		_ = responder.Close()
	})
	return r
}

func (r *rawRoundTrip) once(ctx context.Context) error {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.seq++
	id := strconv.FormatUint(r.seq, 10)
	r.waiting[id] = ch
	r.mu.Unlock()
	n, err := r.pub.Publish(ctx, r.req, id).Result()
	if err != nil || n != 1 {
		return fmt.Errorf("raw PUBLISH = %d, %v", n, err)
	}
	select {
	case <-ch:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("raw round trip %s not back within 10s", id)
	}
}

// run is runLoad for the raw round trip.
func (r *rawRoundTrip) run(tb testing.TB, conc int, cfg loadConfig) runStats {
	tb.Helper()
	ctx := context.Background()
	start := time.Now()
	from := start.Add(cfg.warmup)
	until := from.Add(cfg.measure)
	lats := make([][]time.Duration, conc)
	ends := make([]time.Time, conc)
	errs := make([]error, conc)
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			for {
				t0 := time.Now()
				if !t0.Before(until) {
					return
				}
				if err := r.once(ctx); err != nil {
					errs[w] = err
					return
				}
				if t1 := time.Now(); !t0.Before(from) {
					lats[w] = append(lats[w], t1.Sub(t0))
					ends[w] = t1
				}
			}
		})
	}
	wg.Wait()
	s := runStats{conc: conc}
	var last time.Time
	for w := range conc {
		if errs[w] != nil {
			tb.Fatalf("c=%d: %v", conc, errs[w])
		}
		s.lat = append(s.lat, lats[w]...)
		if ends[w].After(last) {
			last = ends[w]
		}
	}
	if len(s.lat) == 0 {
		tb.Fatalf("c=%d: no raw round trip completed in the measured window", conc)
	}
	s.elapsed = last.Sub(from)
	slices.Sort(s.lat)
	return s
}
