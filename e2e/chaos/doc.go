// Package chaos proves tether's promise under every fault at once: exactly
// one answer per call, by its deadline, from the workspace that was called,
// and success for every call that no fault touched.
//
// TestChaos starts brokers on one redis-server, `tether bridge` processes
// (each behind a TCP proxy of the test's, which can cut or stall its
// socket) and socket.io-client processes (e2e/clients/chaos_client.js,
// which answer after random delays and misbehave on command), then sends
// calls from HTTP callers, Redis callers (broker/caller's BusCaller), async
// callers (caller.HTTP's Submit, Wait, Status and Cancel, some with
// idempotency keys) and MCP clients (the Go MCP SDK on a broker's MCP
// endpoint) while it injects faults at random: bridge kill -9 and restart, a bridge's
// socket cut mid-call, a partition between a bridge and its broker, broker
// kill -9 and restart, Redis restart and CLIENT PAUSE, a client that stops
// reading, drops its connection, answers twice, late, never, or answers a
// call it was not given. Every call is recorded on the caller's side, every
// fault with its time window, and the invariants are checked at the end
// (verdict_test.go says each and how a fault "touches" a call). It prints a
// summary and fails on any violation; docs/reliability.md has the results.
//
// It runs in `make test` in its short configuration (about a minute) and in
// `make chaos` with the knobs below; every process it starts is stopped by
// pid, also on Ctrl-C, and it binds loopback addresses only.
//
//	CHAOS_DURATION   how long calls are sent (default 60s)
//	CHAOS_CALLS      stop after this many calls (default 0: no bound)
//	CHAOS_RATE       calls per second sent, at most (default 200; a
//	                 ceiling: fewer when every caller is busy. The shared
//	                 2-core machine sustained 387/s at 400 with 160 workers,
//	                 so the 1,000,000-call run takes about 45 minutes)
//	CHAOS_WORKERS    concurrent callers (default 64; at rates over 200 give
//	                 about 0.4 per call a second, calls waiting out a
//	                 fault hold theirs for seconds)
//	CHAOS_BROKERS    broker processes (default 3)
//	CHAOS_BRIDGES    tether bridge processes (default 20)
//	CHAOS_CLIENTS    socket.io-client processes (default 10)
//	CHAOS_FAULT_EVERY  mean time between fault injections (default 1.5s)
//	CHAOS_SEED       random seed (default: the time; printed for a replay
//	                 of the same choices, not of the same timing)
//	CHAOS_LOG_LEVEL  the processes' log level (default debug for runs up to
//	                 10 minutes, info beyond)
//	CHAOS_OUT        keep the logs and the call records in this directory
//	                 (default: a temporary one, kept only on failure)
package chaos
