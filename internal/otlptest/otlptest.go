// Package otlptest is an OTLP/HTTP trace receiver for tests: an
// httptest server on 127.0.0.1 that accepts POST /v1/traces (protobuf,
// gzip or not), as a real collector would, and keeps the spans it got so a
// test can check what a tether process exported. Point a process at it
// with OTEL_EXPORTER_OTLP_ENDPOINT=Receiver.URL.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for assertions. IDs are lower-case
// hex as in a traceparent; attribute values are in their string form
// (ints in decimal, bools as true/false).
type Span struct {
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string // "" for a root
	Kind         string // "server", "client", "internal", …
	Start, End   time.Time
	Attributes   map[string]string
	// Resource is the attributes of the resource the span came with
	// (service.name, service.instance.id, service.version, …).
	Resource map[string]string
	// StatusError is set when the span's status is an error.
	StatusError bool
	// Events are the names of the span's events, in order.
	Events []string
}

// Receiver collects the spans POSTed to it.
type Receiver struct {
	// URL is the base URL: the value for OTEL_EXPORTER_OTLP_ENDPOINT.
	URL string

	srv     *httptest.Server
	mu      sync.Mutex
	spans   []Span
	reqs    []*coltracepb.ExportTraceServiceRequest
	batches int
	changed chan struct{} // closed and replaced when spans arrive (Await)
}

// Start runs a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.URL = r.srv.URL
	t.Cleanup(r.srv.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "this receiver takes POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	raw, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				var events []string
				for _, e := range s.GetEvents() {
					events = append(events, e.GetName())
				}
				got = append(got, Span{
					Name:         s.GetName(),
					TraceID:      hex.EncodeToString(s.GetTraceId()),
					SpanID:       hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Kind:         kindName(int32(s.GetKind())),
					Start:        time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:          time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Attributes:   attrMap(s.GetAttributes()),
					Resource:     res,
					StatusError:  s.GetStatus().GetCode() == 2, // STATUS_CODE_ERROR
					Events:       events,
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.reqs = append(r.reqs, &msg)
	r.batches++
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// Spans returns every span received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests returns every request received so far, decoded, in arrival
// order: for a test that compares exports field by field.
func (r *Receiver) Requests() []*coltracepb.ExportTraceServiceRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*coltracepb.ExportTraceServiceRequest(nil), r.reqs...)
}

// Named returns the spans received so far called name.
func (r *Receiver) Named(name string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Trace returns the spans received so far of the trace traceID (hex).
func (r *Receiver) Trace(traceID string) []Span {
	return Filter(r.Spans(), func(s Span) bool { return s.TraceID == traceID })
}

// Service returns the spans received so far whose resource's service.name
// is name.
func (r *Receiver) Service(name string) []Span {
	return Filter(r.Spans(), func(s Span) bool { return s.Resource["service.name"] == name })
}

// Await waits until cond holds of every span received so far, and
// returns them; each export that arrives wakes it. It fails t, naming
// what and listing the spans it got, when within passes first.
func (r *Receiver) Await(t testing.TB, within time.Duration, what string, cond func([]Span) bool) []Span {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if cond(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			var list strings.Builder
			for _, s := range spans {
				list.WriteString("  " + s.String() + "\n")
			}
			t.Fatalf("OTLP receiver: no %s within %s; received:\n%s", what, within, list.String())
			return nil
		}
	}
}

// AwaitSpan waits for a span match accepts and returns it, as Await.
func (r *Receiver) AwaitSpan(t testing.TB, within time.Duration, what string, match func(Span) bool) Span {
	t.Helper()
	var found Span
	r.Await(t, within, what, func(spans []Span) bool {
		for _, s := range spans {
			if match(s) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// Filter returns the spans keep accepts.
func Filter(spans []Span, keep func(Span) bool) []Span {
	var out []Span
	for _, s := range spans {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// String names the span for a failure message: its service and instance,
// name, kind, ids and attributes.
func (s Span) String() string {
	return fmt.Sprintf("%s/%s %q (%s) trace %s span %s parent %s attrs %v", s.Resource["service.name"], s.Resource["service.instance.id"], s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentSpanID, s.Attributes)
}

// Batches is how many export requests arrived.
func (r *Receiver) Batches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batches
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = valueString(kv.GetValue())
	}
	return m
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	default:
		return v.String()
	}
}

func kindName(k int32) string {
	switch k {
	case 1:
		return "internal"
	case 2:
		return "server"
	case 3:
		return "client"
	case 4:
		return "producer"
	case 5:
		return "consumer"
	default:
		return "unspecified"
	}
}
