// Package bench holds the end-to-end load benchmarks of tether. They start
// the real binary named by $TETHER_BIN (`make bench-e2e` builds and sets it)
// and drive it from this process; without TETHER_BIN they skip.
//
//   - BenchmarkRelay: /api/ping from an HTTP caller through a broker and a
//     bridge (separate processes) and back, on loopback, at concurrency 1, 16
//     and 64. Each concurrency is measured against a plain net/http echo
//     server in a child process, driven by the same load generator in the
//     same run, and the table gives tether's figures as ratios of the
//     baseline's, because these machines are noisy (STYLE.md, lesson 10).
//   - BenchmarkIdleConnections: broker memory per idle Socket.IO connection.
//   - BenchmarkAsyncCalls: an async submit followed by a wait for its outcome
//     against a synchronous call of the same /api/ping, in the same run, on a
//     broker in memory and on Redis, at concurrency 1 and 64; the medians of
//     the per-run ratios against the target (1.5x the sync p50 on Redis);
//     on Redis also a synchronous call through a second broker, which
//     crosses Redis as an async call's store steps do.
//   - BenchmarkMCPToolCall: the MCP tool call terminal_run {"command":"true"}
//     over the broker's MCP endpoint and over `tether mcp` (stdio), from a
//     lean MCP client, against the same tether call through the HTTP call
//     API in the same run; the p50 differences against the target (MCP adds
//     at most 0.5 ms), and the Go SDK's client over HTTP for reference.
//
// Run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./e2e/bench/
//
// Environment:
//
//	BENCH_DURATION    measured time per run (default 3s), after a warm-up
//	BENCH_WARMUP      warm-up per run (default 500ms)
//	BENCH_RUNS        runs per concurrency and target; medians are reported (default 3)
//	BENCH_IDLE_CONNS  connections for BenchmarkIdleConnections (default 5000)
package bench
