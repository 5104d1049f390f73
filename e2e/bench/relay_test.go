package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/tetherdev/tether/broker/auth"
)

// relayConcurrencies are the load levels of the issue.
var relayConcurrencies = []int{1, 16, 64}

// Targets of the broker issue, printed next to the results.
const (
	targetRate64  = 20000 // calls/s at concurrency 64
	targetP99At64 = 7 * time.Millisecond
	targetP50At1  = 200 * time.Microsecond
)

// relayRow is one concurrency's result: medians over the runs.
type relayRow struct {
	conc                       int
	rate, p50, p99             float64 // tether: calls/s, ms, ms
	baseRate, baseP50, baseP99 float64
	xRate, xP50, xP99          float64 // medians of the per-run ratios tether/baseline
	rssMB, peakMB              float64 // broker, after the last run
	brokerCPU, bridgeCPU       float64 // µs of CPU per call
	loadCPU, baseCPU           float64 // µs per call: the load generator (tether runs), the echo server
}

// BenchmarkRelay measures /api/ping from an HTTP caller through a broker and
// a bridge and back, against a one-hop net/http echo server measured by the
// same load generator in the same run. Runs alternate baseline and tether so
// that drift on a shared machine hits both alike.
func BenchmarkRelay(b *testing.B) {
	bin := tetherBin(b)
	cfg := loadConfigFromEnv(b)
	brk, secret := startBroker(b, bin)
	bridge := startBridge(b, bin, brk, secret, "bench")
	echo := startEcho(b)
	tether := target{url: brk.url + "/api/v1/workspaces/bench/calls", token: mintToken(b, secret, auth.RoleCaller, "bench")}
	baseline := target{url: echo.url + echoCallPath}

	fmt.Printf("\nrelay: %d×(%v warm-up + %v measured) per concurrency and target; CPUs: %d\n", cfg.runs, cfg.warmup, cfg.measure, runtime.NumCPU())
	var rows []relayRow
	for _, conc := range relayConcurrencies {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			var tRate, tP50, tP99, bRate, bP50, bP99, brokerCPU, bridgeCPU, loadCPU, baseCPU []float64
			// Ratios are taken per run, against the baseline run just
			// before, then their median: drift between runs cancels out.
			var xRate, xP50, xP99 []float64
			var rss, peak int64 // broker, KB, after the latest run
			var err error
			for run := 1; run <= cfg.runs; run++ {
				echoCPU0 := cpuTime(echo.pid())
				base := runLoad(b, baseline, conc, cfg)
				echoCPU := cpuTime(echo.pid()) - echoCPU0

				brokerCPU0, bridgeCPU0 := cpuTime(brk.pid()), cpuTime(bridge.pid())
				t := runLoad(b, tether, conc, cfg)
				brokerUsed, bridgeUsed := cpuTime(brk.pid())-brokerCPU0, cpuTime(bridge.pid())-bridgeCPU0

				// CPU is counted over warm-up and measurement both.
				tCalls := t.rate() * (cfg.warmup + cfg.measure).Seconds()
				bCalls := base.rate() * (cfg.warmup + cfg.measure).Seconds()
				tRate, tP50, tP99 = append(tRate, t.rate()), append(tP50, ms(t.quantile(.5))), append(tP99, ms(t.quantile(.99)))
				bRate, bP50, bP99 = append(bRate, base.rate()), append(bP50, ms(base.quantile(.5))), append(bP99, ms(base.quantile(.99)))
				xRate = append(xRate, t.rate()/base.rate())
				xP50 = append(xP50, float64(t.quantile(.5))/float64(base.quantile(.5)))
				xP99 = append(xP99, float64(t.quantile(.99))/float64(base.quantile(.99)))
				brokerCPU = append(brokerCPU, us(brokerUsed)/tCalls)
				bridgeCPU = append(bridgeCPU, us(bridgeUsed)/tCalls)
				loadCPU = append(loadCPU, us(t.loadCPU)/float64(len(t.lat)))
				baseCPU = append(baseCPU, us(echoCPU)/bCalls)
				rss, peak, err = brk.memKB()
				if err != nil {
					b.Fatal(err)
				}
				fmt.Printf("  c=%-2d run %d/%d  baseline %7.0f calls/s p50 %6.3f ms p99 %6.3f ms | tether %7.0f calls/s p50 %6.3f ms p99 %6.3f ms, broker RSS %.1f MB\n",
					conc, run, cfg.runs, base.rate(), ms(base.quantile(.5)), ms(base.quantile(.99)),
					t.rate(), ms(t.quantile(.5)), ms(t.quantile(.99)), float64(rss)/1024)
			}
			row := relayRow{
				conc: conc,
				rate: median(tRate), p50: median(tP50), p99: median(tP99),
				baseRate: median(bRate), baseP50: median(bP50), baseP99: median(bP99),
				xRate: median(xRate), xP50: median(xP50), xP99: median(xP99),
				rssMB: float64(rss) / 1024, peakMB: float64(peak) / 1024,
				brokerCPU: median(brokerCPU), bridgeCPU: median(bridgeCPU),
				loadCPU: median(loadCPU), baseCPU: median(baseCPU),
			}
			rows = append(rows, row)
			b.ReportMetric(0, "ns/op") // one op is a whole measurement; the metrics below say it
			b.ReportMetric(row.rate, "calls/s")
			b.ReportMetric(row.p50, "p50-ms")
			b.ReportMetric(row.p99, "p99-ms")
			b.ReportMetric(row.rssMB, "rss-MB")
			b.ReportMetric(row.baseRate, "base-calls/s")
			b.ReportMetric(row.xRate, "x-base-calls/s")
			b.ReportMetric(row.xP50, "x-base-p50")
			b.ReportMetric(row.xP99, "x-base-p99")
		})
	}
	printRelayTable(os.Stdout, rows, cfg)
}

func printRelayTable(out io.Writer, rows []relayRow, cfg loadConfig) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\nPOST /api/v1/workspaces/bench/calls /api/ping (%d B payload), HTTP caller → broker → bridge → back, loopback, %d CPUs\n", len(pingPayload), runtime.NumCPU())
	fmt.Fprintf(out, "median of %d runs of %v (after %v warm-up); baseline: net/http echo server in its own process, same load generator, same run\n", cfg.runs, cfg.measure, cfg.warmup)
	fmt.Fprintf(out, "×base: median of the per-run ratios tether/baseline (runs alternate baseline, tether); CPU: per call, over warm-up and measurement\n\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conc\t tether calls/s\tp50 ms\tp99 ms\t baseline calls/s\tp50 ms\tp99 ms\t ×base calls/s\t×base p50\t×base p99\t broker RSS MB\tpeak MB\t CPU µs/call broker\tbridge\tloadgen\techo\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t %.0f\t%.3f\t%.3f\t %.0f\t%.3f\t%.3f\t %.2f\t%.2f\t%.2f\t %.1f\t%.1f\t %.1f\t%.1f\t%.1f\t%.1f\t\n",
			r.conc, r.rate, r.p50, r.p99, r.baseRate, r.baseP50, r.baseP99,
			r.xRate, r.xP50, r.xP99, r.rssMB, r.peakMB,
			r.brokerCPU, r.bridgeCPU, r.loadCPU, r.baseCPU)
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	for _, r := range rows {
		switch r.conc {
		case 1:
			fmt.Fprintf(out, "target c=1:  p50 %.3f ms, want ≤ %.3f ms: %s\n", r.p50, ms(targetP50At1), verdict(r.p50 <= ms(targetP50At1)))
		case 64:
			fmt.Fprintf(out, "target c=64: %.0f calls/s, want ≥ %d: %s\n", r.rate, targetRate64, verdict(r.rate >= targetRate64))
			fmt.Fprintf(out, "target c=64: p99 %.3f ms, want ≤ %.3f ms: %s\n", r.p99, ms(targetP99At64), verdict(r.p99 <= ms(targetP99At64)))
		}
	}
	fmt.Fprintln(out)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN() // a setup left out (BENCH_REDIS_SETUPS)
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
