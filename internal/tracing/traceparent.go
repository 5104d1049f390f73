package tracing

import (
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/internal/tuning"
)

// parseTraceparent parses a version-00 traceparent, the form every
// traceparent tether and its callers send takes, by W3C Trace Context's
// rules as propagation.TraceContext applies them: exactly
// "00-" 32 lowercase hex digits "-" 16 lowercase hex digits "-" 2 of them,
// a trace ID and a span ID not all zeros, no flag but sampled and random
// (0x03); and as the propagator, it takes one "-" after the flags, which
// W3C's version 00 does not have, so that it changes nothing Extract
// took. It returns the remote span context, or ok false when s is not
// valid. handled is false when s does not begin with "00": another
// version, which the propagator parses. FuzzParseTraceparent holds it to
// the propagator's result on every input.
//
// It is hand-written for Extract on every traced call: the propagator's
// carrier, its split of the header and its parse of an empty tracestate
// were ~0.4 µs of a traced broker's ~31 µs per call (perf under
// BenchmarkTracingCost); see leanTracing for the figure of both.
func parseTraceparent(s string) (sc trace.SpanContext, ok, handled bool) {
	if len(s) < 2 || s[0] != '0' || s[1] != '0' {
		return trace.SpanContext{}, false, false
	}
	if (len(s) != 55 && (len(s) != 56 || s[55] != '-')) || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false, true
	}
	var cfg trace.SpanContextConfig
	bad := decodeHex(cfg.TraceID[:], s[3:35]) | decodeHex(cfg.SpanID[:], s[36:52])
	var flags [1]byte
	bad |= decodeHex(flags[:], s[53:55])
	if bad&0xf0 != 0 || flags[0] > 3 || !cfg.TraceID.IsValid() || !cfg.SpanID.IsValid() {
		return trace.SpanContext{}, false, true
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0])
	cfg.Remote = true
	return trace.NewSpanContext(cfg), true, true
}

// decodeHex decodes the lowercase hex src into dst (half its length). Its
// result has a bit of 0xf0 set when src had a byte that is not a lowercase
// hex digit.
func decodeHex(dst []byte, src string) byte {
	var bad byte
	for i := range dst {
		hi, lo := unhex[src[2*i]], unhex[src[2*i+1]]
		dst[i] = hi<<4 | lo
		bad |= hi | lo
	}
	return bad
}

// unhex maps a lowercase hex digit to its value and anything else to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// ownParse reports whether Extract parses a plain traceparent itself
// (TETHER_TUNING=no-leanspans turns it off with the lean spans).
var ownParse = sync.OnceValue(func() bool { return tuning.On(tuning.LeanSpans) })
