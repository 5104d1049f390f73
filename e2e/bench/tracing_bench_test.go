package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/tetherdev/tether/broker/auth"
)

// The tracing issue's target: with tracing on and every call sampled, the
// broker spends at most this many times the CPU per call it spends with
// tracing off, in the same run.
const targetTracingCPUx = 1.15

// tracingConcurrency is the load of BenchmarkTracingCost: enough calls in
// flight that the broker's CPU per call is its work, not its wake-ups.
const tracingConcurrency = 32

// BenchmarkTracingCost measures what OpenTelemetry tracing costs the
// broker: two brokers of the same binary, each with a bridge, one with
// tracing off (no OTEL_* set) and one with tracing on (every call sampled,
// OTEL_TRACES_SAMPLER=always_on, spans exported over OTLP/HTTP to a sink
// in this process), take the same synchronous /api/ping calls in turn, run
// after run. Each call carries a caller's traceparent, which the traced
// broker continues (a call span and a deliver span per call) and the
// untraced one passes through. Reported: the broker's CPU per call in
// each, and the median of the per-run ratios on/off, against
// targetTracingCPUx. BENCH_RUNS, BENCH_DURATION and BENCH_WARMUP shape the
// runs.
//
// With TETHER_BIN_BASELINE set to another build (one without tracing, say
// main's before it), a third broker of that build takes the same calls in
// each run, and the untraced broker's CPU per call is reported against it:
// what tracing costs when it is off.
func BenchmarkTracingCost(b *testing.B) {
	bin := tetherBin(b)
	cfg := loadConfigFromEnv(b)
	var exports, exported atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exports.Add(1)
		exported.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	traced := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.URL,
		"OTEL_TRACES_SAMPLER=always_on",
	}
	off, offSecret := startBroker(b, bin, "--instance-id", "untraced")
	offBridge := startBridge(b, bin, off, offSecret, "bench-trace-off")
	onSecret := newSecret()
	on := startBrokerEnv(b, bin, onSecret, traced, "--instance-id", "traced")
	onBridge := startBridge(b, bin, on, onSecret, "bench-trace-on")
	// The bridges run with no OTEL_* set: what is measured is the broker.
	_, _ = offBridge, onBridge
	var base *server
	var baseTgt target
	if baseBin := os.Getenv("TETHER_BIN_BASELINE"); baseBin != "" {
		var baseSecret []byte
		base, baseSecret = startBroker(b, baseBin, "--instance-id", "baseline")
		startBridge(b, baseBin, base, baseSecret, "bench-trace-base")
		baseTgt = target{url: base.url + "/api/v1/workspaces/bench-trace-base/calls", token: mintToken(b, baseSecret, auth.RoleCaller, "bench-trace-base")}
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	offTgt := target{url: off.url + "/api/v1/workspaces/bench-trace-off/calls", token: mintToken(b, offSecret, auth.RoleCaller, "bench-trace-off"), traceparent: tp}
	onTgt := target{url: on.url + "/api/v1/workspaces/bench-trace-on/calls", token: mintToken(b, onSecret, auth.RoleCaller, "bench-trace-on"), traceparent: tp}

	var offCPU, onCPU, ratios, offRate, onRate, baseCPU, offXBase []float64
	for run := 1; run <= cfg.runs; run++ {
		if base != nil {
			bs := runLoadOver(b, []target{baseTgt}, tracingConcurrency, cfg, []int{base.pid()})
			// The same call without a traceparent on the untraced broker:
			// the path of a deployment that never heard of tracing.
			plain := offTgt
			plain.traceparent = ""
			o := runLoadOver(b, []target{plain}, tracingConcurrency, cfg, []int{off.pid()})
			bc, oc := bs.cpuPerCall()[1], o.cpuPerCall()[1]
			baseCPU, offXBase = append(baseCPU, bc), append(offXBase, oc/bc)
			fmt.Printf("  run %d: untraced, no traceparent: baseline build %.1f µs, this build %.1f µs (×%.3f)\n", run, bc, oc, oc/bc)
		}
		o := runLoadOver(b, []target{offTgt}, tracingConcurrency, cfg, []int{off.pid()})
		t := runLoadOver(b, []target{onTgt}, tracingConcurrency, cfg, []int{on.pid()})
		oc, tc := o.cpuPerCall()[1], t.cpuPerCall()[1]
		offCPU, onCPU, ratios = append(offCPU, oc), append(onCPU, tc), append(ratios, tc/oc)
		offRate, onRate = append(offRate, o.rate()), append(onRate, t.rate())
		fmt.Printf("  run %d: broker CPU per call off %.1f µs, on %.1f µs (×%.3f); %.0f vs %.0f calls/s\n", run, oc, tc, tc/oc, o.rate(), t.rate())
	}
	x := median(ratios)
	verdict := "within"
	if x > targetTracingCPUx {
		verdict = "OVER"
	}
	fmt.Printf("\ntracing cost: /api/ping with a traceparent, HTTP caller → broker → bridge, c=%d, %d runs of %v (after %v warm-up), %d CPUs\n",
		tracingConcurrency, cfg.runs, cfg.measure, cfg.warmup, runtime.NumCPU())
	fmt.Printf("  broker CPU per call: off %.1f µs, on %.1f µs; on/off ×%.3f (median of per-run ratios), %s the ×%.2f target\n",
		median(offCPU), median(onCPU), x, verdict, targetTracingCPUx)
	fmt.Printf("  calls/s: off %.0f, on %.0f; OTLP exports received: %d (%d bytes)\n", median(offRate), median(onRate), exports.Load(), exported.Load())
	if base != nil {
		fmt.Printf("  tracing off, no traceparent: this build ×%.3f the baseline build's broker CPU per call (%.1f µs; median of per-run ratios)\n", median(offXBase), median(baseCPU))
	}
	if exports.Load() == 0 {
		b.Fatal("the traced broker exported no spans")
	}
	if os.Getenv("BENCH_TRACING_ENFORCE") != "" && x > targetTracingCPUx {
		b.Fatalf("tracing costs ×%.3f broker CPU per call, over the ×%.2f target", x, targetTracingCPUx)
	}
	b.ReportMetric(x, "cpu-on/off")
}
