package tracing

import (
	"encoding/hex"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The attributes of a call's spans, at every hop: which call it is and how
// it ended. Never its payload, its result or a token.
const (
	WorkspaceID   = attribute.Key("tether.workspace_id")
	Endpoint      = attribute.Key("tether.endpoint")
	CorrelationID = attribute.Key("tether.correlation_id")
	// Outcome is the answer's error code, or "success".
	Outcome = attribute.Key("tether.outcome")
)

// CallAttributes are the attributes naming a call, and more, in one slice
// for a span's start.
func CallAttributes(ws, endpoint, cid string, more ...attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, 3+len(more))
	out = append(out, WorkspaceID.String(ws), Endpoint.String(endpoint), CorrelationID.String(cid))
	return append(out, more...)
}

// outcomeSuccess is the outcome of a call that succeeded, shared: the
// variadic slice of SetAttributes, an interface method, would otherwise
// be allocated on every traced call. Spans copy what they are given.
var outcomeSuccess = []attribute.KeyValue{Outcome.String("success")}

// EndCall ends span, a span of a call, with the call's outcome: success, or
// the error code (which also marks the span's status as an error). span
// may be nil (tracing off).
func EndCall(span trace.Span, success bool, code string) {
	if span == nil {
		return
	}
	// No IsRecording first: it takes the span's lock, and these are no-ops
	// on a span that does not record.
	if success {
		span.SetAttributes(outcomeSuccess...)
	} else {
		span.SetAttributes(Outcome.String(code))
		span.SetStatus(codes.Error, code)
	}
	span.End()
}

// Format returns the W3C traceparent of sc, or "" when sc is not valid. It
// is Traceparent without a context or a carrier map, for the call path.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}
