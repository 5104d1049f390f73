//go:build !windows

package main

import (
	"context"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/buildinfo"
	"github.com/tetherdev/tether/internal/tracing"
)

// bridgeTracingShutdown bounds exporting the spans still queued when a
// bridge exits: an unreachable endpoint must not hold up its exit.
const bridgeTracingShutdown = 5 * time.Second

// bridgeTracing sets up tracing for a bridge serving workspace, from the
// OTEL_* environment (off when it names no endpoint), and returns the
// function that flushes and stops it, within bridgeTracingShutdown. The
// bridge's resource is service.name tether-bridge (OTEL_SERVICE_NAME
// wins), service.instance.id <workspace>@<host>, service.version the
// release version. The bridge serves no /metrics: failed exports are
// logged at debug, and their count at exit.
func bridgeTracing(workspace string, log zerolog.Logger) (shutdown func(), err error) {
	host, _ := os.Hostname()
	id := host
	if workspace != "" {
		id = workspace + "@" + host
	}
	t, err := tracing.Setup(context.Background(), tracing.Service{Name: "tether-bridge", InstanceID: id, Version: buildinfo.Version()}, log)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), bridgeTracingShutdown)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			log.Warn().Err(err).Msg("tracing: spans still queued at exit could not be exported")
		}
		// With no /metrics to count them in, the exit says how many.
		if n := spansDropped(t); n > 0 {
			log.Warn().Float64("spans_dropped", n).Msg("tracing: spans could not be exported (the OTLP endpoint failed or was unreachable)")
		}
	}, nil
}

// spansDropped reads tether_trace_spans_dropped_total from t's collectors.
func spansDropped(t *tracing.Tracing) float64 {
	reg := prometheus.NewRegistry()
	for _, c := range t.Collectors() {
		if reg.Register(c) != nil {
			return 0
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var n float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}
