// Package tracingtest records the spans code under test makes: tracing on,
// through an in-memory recorder installed as the global tracer provider.
package tracingtest

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tetherdev/tether/internal/tracing"
)

// Record turns tracing on with an in-memory recorder for the rest of the
// test and returns the recorder. Tests using it must not run in parallel:
// the provider is global.
func Record(t testing.TB) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	restore := tracing.UseProvider(tp)
	t.Cleanup(func() {
		restore()
		_ = tp.Shutdown(context.Background())
	})
	return rec
}
