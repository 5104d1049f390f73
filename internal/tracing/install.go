package tracing

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// UseProvider makes tp the global tracer provider and turns On, until the
// returned restore puts back what was there before. It exists for tests:
// they record spans with the SDK's in-memory exporter
// (go.opentelemetry.io/otel/sdk/trace/tracetest) and need the code under
// test to take its traced path, which On guards. Processes use Setup.
// Tests that use it must not run in parallel with each other.
func UseProvider(tp trace.TracerProvider) (restore func()) {
	prevTP, prevProp, prevOn, prevLean := otel.GetTracerProvider(), otel.GetTextMapPropagator(), on.Load(), lean.Load()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	lean.Store(nil) // Tracer's spans are tp's
	on.Store(true)
	return func() {
		on.Store(prevOn)
		lean.Store(prevLean)
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	}
}
