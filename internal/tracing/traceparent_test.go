package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagatorSays is what propagation.TraceContext makes of traceparent
// with no tracestate: the remote span context, or an invalid one.
func propagatorSays(traceparent string) trace.SpanContext {
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), &headers{traceparent: traceparent}))
}

// agrees checks that Extract (parseTraceparent for a version 00) makes of
// traceparent what the propagator makes of it.
func agrees(t *testing.T, traceparent string) {
	t.Helper()
	want := propagatorSays(traceparent)
	ctx, ok := Extract(context.Background(), traceparent, "")
	got := trace.SpanContextFromContext(ctx)
	if ok != want.IsValid() || !got.Equal(want) || got.IsRemote() != want.IsRemote() {
		t.Fatalf("%q: Extract gives %v (ok %v, remote %v); the propagator %v (remote %v)",
			traceparent, got, ok, got.IsRemote(), want, want.IsRemote())
	}
	if sc, ok, handled := parseTraceparent(traceparent); handled && (ok != want.IsValid() || !sc.Equal(want)) {
		t.Fatalf("%q: parseTraceparent gives %v (ok %v); the propagator %v", traceparent, sc, ok, want)
	}
}

// traceparentSeeds are valid traceparents and each kind of invalid one.
var traceparentSeeds = []string{
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-02",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff",
	"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
	"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-701",
	"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
	"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
	"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09",
	"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00", "0", "00-", "garbage", " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}

func TestExtractAgreesWithThePropagator(t *testing.T) {
	// Every seed, and every one-byte change of a valid traceparent to a
	// byte that matters: each hex digit's neighbours, a capital, a dash,
	// a space, a zero byte, a non-ASCII byte.
	for _, s := range traceparentSeeds {
		agrees(t, s)
	}
	valid := traceparentSeeds[0]
	for i := range len(valid) {
		for _, c := range []byte("0019afgAF- \x00\xff") {
			b := []byte(valid)
			b[i] = c
			agrees(t, string(b))
		}
		agrees(t, valid[:i])
		agrees(t, valid[:i]+valid[i+1:])
	}
	agrees(t, strings.Repeat("0", 55))
}

func FuzzParseTraceparent(f *testing.F) {
	for _, s := range traceparentSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		agrees(t, s)
	})
}
