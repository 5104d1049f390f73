package e2e_test

import (
	"net"
	"testing"

	"github.com/tetherdev/tether/internal/otlptest"
)

// The e2e side of tracing tests: what a tether process is started with to
// export to an OTLP receiver (internal/otlptest), an endpoint that is
// down, and finding a broker's spans.

// otlpEnv is the environment of a process exporting spans to endpoint,
// quickly: every span sampled, batches every 50 ms, a 2 s export timeout.
func otlpEnv(endpoint string) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint,
		"OTEL_TRACES_SAMPLER=always_on",
		"OTEL_BSP_SCHEDULE_DELAY=50",
		"OTEL_EXPORTER_OTLP_TIMEOUT=2000",
	}
}

// closedPort is the address of a loopback port nothing listens on: an OTLP
// endpoint that is down.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// findSpans returns the spans named name of trace traceID from the service
// instance (a broker's --instance-id).
func findSpans(spans []otlptest.Span, traceID, service, instance, name string) []otlptest.Span {
	return otlptest.Filter(spans, func(s otlptest.Span) bool {
		return s.TraceID == traceID && s.Resource["service.name"] == service && s.Resource["service.instance.id"] == instance && s.Name == name
	})
}
