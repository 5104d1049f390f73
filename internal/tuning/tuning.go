// Package tuning switches tether's hand-tuned pieces off, each alone or all
// at once, for one process: each piece's doc comment names the benchmark
// and the figure it earns against the plain standard-library or library
// way, and this switch is how that figure is measured (make bench-peers
// runs tether with each piece off beside tether with all on, in one run)
// and how the plain way stays tested (CI runs the e2e suite once with
// every piece off).
//
// The switch is the environment variable TETHER_TUNING, read once: empty
// or unset, every piece is on; "off", every piece is off; otherwise a
// comma-separated list of pieces to turn off, each named with "no-"
// before it (TETHER_TUNING=no-callserver,no-poller). Pieces lists them.
package tuning

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// Env is the environment variable that switches pieces off.
const Env = "TETHER_TUNING"

// A Piece is one hand-tuned piece of tether.
type Piece string

// The pieces, and the plain way each falls back to when it is off.
const (
	// RawNet: internal/rawnet's system calls the runtime is not told of;
	// off, connections are read and written as net makes them.
	RawNet Piece = "rawnet"
	// Sock: broker/eio's sock, a WebSocket's TCP connection over small
	// pooled buffers with corked batch writes (over TLS, where no sock can
	// read, writes bounded by the connection's deadline and a kept read
	// buffer: eio's plainConn); off, coder/websocket reads and writes
	// through net/http's hijacked buffers (and no session parks: the
	// poller needs the sock).
	Sock Piece = "sock"
	// Poller: broker/eio's epoll poller, which parks a quiet WebSocket
	// without a goroutine; off, every session keeps its reader.
	Poller Piece = "poller"
	// CallServer: broker/api's call server, which reads and answers the
	// API's hot requests itself; off, net/http serves every request.
	CallServer Piece = "callserver"
	// FastJSON: protocol's one-pass validating codec for the messages on
	// the hot path; off, encoding/json decodes and encodes them.
	FastJSON Piece = "fastjson"
	// RedisPipe: broker/bus's own pipelined connection for PUBLISH on a
	// single Redis; off, go-redis's client publishes.
	RedisPipe Piece = "redispipe"
	// ProcPace: internal/procpace, GOMAXPROCS by load; off, the runtime's
	// default.
	ProcPace Piece = "procpace"
	// GCPace: internal/gcpace, GOGC by heap size; off, the runtime's
	// default (100).
	GCPace Piece = "gcpace"
	// Workers: internal/workers' kept goroutines; off, a goroutine per
	// function.
	Workers Piece = "workers"
	// LeanSpans: internal/tracing's own spans for the broker's call path
	// and its own parse of a plain traceparent; off, the OpenTelemetry
	// SDK's spans and propagator.
	LeanSpans Piece = "leanspans"
	// BuildStamps: dap's build stamps, which let a warm Go start skip go
	// build when nothing it reads has changed; off, every warm Go start
	// runs go build, which finds an unchanged program up to date.
	BuildStamps Piece = "buildstamps"
	// LLDBPreload: dap's preload of the last program into a warm
	// lldb-dap's module cache; off, a warm lldb-dap is only started and
	// initialized.
	LLDBPreload Piece = "lldbpreload"
)

// Pieces lists every piece, in the order reports show them.
var Pieces = []Piece{RawNet, Sock, Poller, CallServer, FastJSON, RedisPipe, ProcPace, GCPace, Workers, LeanSpans, BuildStamps, LLDBPreload}

var (
	once sync.Once
	off  map[Piece]bool
	bad  error
)

func load() {
	off, bad = Parse(os.Getenv(Env))
}

// Parse reads a value of TETHER_TUNING: the pieces it turns off.
func Parse(v string) (map[Piece]bool, error) {
	out := make(map[Piece]bool)
	switch v = strings.TrimSpace(v); v {
	case "", "on":
		return out, nil
	case "off":
		for _, p := range Pieces {
			out[p] = true
		}
		return out, nil
	}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		name, ok := strings.CutPrefix(item, "no-")
		if !ok || !slices.Contains(Pieces, Piece(name)) {
			return out, fmt.Errorf("%s=%q: %q is not \"off\" nor no-PIECE with a piece of %s", Env, v, item, strings.Join(names(), ","))
		}
		out[Piece(name)] = true
	}
	return out, nil
}

func names() []string {
	out := make([]string, len(Pieces))
	for i, p := range Pieces {
		out[i] = string(p)
	}
	return out
}

// On reports whether piece p is on in this process.
func On(p Piece) bool {
	once.Do(load)
	return !off[p]
}

// Check returns the error in TETHER_TUNING, if any, for a command to refuse
// it at start (a misspelt piece would otherwise be on, silently).
func Check() error {
	once.Do(load)
	return bad
}

// Off lists the pieces turned off in this process, for a log line.
func Off() []string {
	once.Do(load)
	var out []string
	for _, p := range Pieces {
		if off[p] {
			out = append(out, string(p))
		}
	}
	return out
}
