package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestExtractThenTraceparentGivesTheSameTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, ok := Extract(context.Background(), tp, "")
	if !ok {
		t.Fatal("a valid traceparent was not extracted")
	}
	if got := Traceparent(ctx); got != tp {
		t.Fatalf("Traceparent = %q, want %q", got, tp)
	}
}

func TestExtractIgnoresAMalformedTraceparent(t *testing.T) {
	for _, tp := range []string{"", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-zz-01"} {
		ctx, ok := Extract(context.Background(), tp, "")
		if ok || Traceparent(ctx) != "" {
			t.Errorf("%q: extracted (ok %v, traceparent %q); want ignored", tp, ok, Traceparent(ctx))
		}
	}
}

func TestConfiguredOnlyWithAnEndpointAndNotDisabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"} {
			t.Setenv(k, c.env[k])
		}
		if got := Configured(); got != c.want {
			t.Errorf("%v: Configured() = %v, want %v", c.env, got, c.want)
		}
	}
}

func TestFormatAgreesWithTraceparent(t *testing.T) {
	for _, tp := range []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"} {
		ctx, _ := Extract(context.Background(), tp, "")
		if got := Format(trace.SpanContextFromContext(ctx)); got != tp || got != Traceparent(ctx) {
			t.Errorf("Format = %q, Traceparent = %q, want %q", got, Traceparent(ctx), tp)
		}
	}
	if got := Format(trace.SpanContext{}); got != "" {
		t.Errorf("Format of an invalid span context = %q, want empty", got)
	}
}

func BenchmarkExtract(b *testing.B) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	b.Run("extract", func(b *testing.B) {
		for b.Loop() {
			_, _ = Extract(context.Background(), tp, "")
		}
	})
	b.Run("propagator-with-a-map", func(b *testing.B) {
		for b.Loop() {
			_ = propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
		}
	})
}
