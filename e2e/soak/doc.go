// Package soak holds one broker under many connections for minutes and
// checks that what they cost comes back when they go (docs/reliability.md).
//
// TestSoak starts `tether broker` (one instance, in-memory bus) with a short
// heartbeat, connects SOAK_CONNS idle socket.io connections (the real
// socket.io-client, e2e/clients/echo_clients.js, several connections per
// node process) and SOAK_BRIDGES bridges, of which SOAK_BRIDGE_PROCS are
// `tether bridge` processes and the rest the bridge package run in this
// process (a bridge process costs about 19 MB; a thousand of them do not fit
// next to the other work of a 2-core, 24 GB machine). For SOAK_DURATION it
// sends a trickle of calls to random workspaces, every one of which must
// succeed, and samples the broker's RSS, goroutines, descriptors and heap.
// Then it disconnects everything and waits until the broker's goroutines,
// descriptors and heap are back within a stated margin of what they were
// before the first connection (and reports RSS, which the Go runtime gives
// back to the system more slowly).
//
// It runs only with TETHER_SOAK=1 (`make soak`). Knobs:
//
//	SOAK_CONNS          idle socket.io connections (default 10000)
//	SOAK_BRIDGES        bridges (default 1000)
//	SOAK_BRIDGE_PROCS   of which tether bridge processes (default 100)
//	SOAK_DURATION       how long the connections are held (default 5m)
//	SOAK_PING_INTERVAL  the broker's Engine.IO ping interval (default 5s; its timeout is the same)
//	SOAK_RATE           calls per second during the soak (default 20)
//	SOAK_SAMPLE         time between samples (default 30s)
package soak
