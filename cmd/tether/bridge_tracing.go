//go:build !windows

package main

import (
	"context"
	"os"
	"time"

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
// release version. The bridge serves no /metrics, so the count of spans
// dropped is not exposed; failed exports are logged at debug.
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
	}, nil
}
