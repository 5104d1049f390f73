package e2e_test

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver of the test's own, on
// 127.0.0.1: it takes POST /v1/traces (protobuf, gzip or not), as tether's
// exporter sends them (internal/tracing), and keeps every span with its
// resource, for the test to find by trace id, service or name.
type otlpReceiver struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	spans    []gotSpan
	requests int
	changed  chan struct{} // closed and replaced on every request
}

// gotSpan is one span received, with its resource's and its own attributes
// flattened to strings.
type gotSpan struct {
	Resource map[string]string // service.name, service.instance.id, service.version...
	Attrs    map[string]string
	Name     string
	Kind     tracepb.Span_SpanKind
	TraceID  string // hex
	SpanID   string
	ParentID string // "" for a root span
	Status   tracepb.Status_StatusCode
}

// Service is the span's service.name.
func (s gotSpan) Service() string { return s.Resource["service.name"] }

func (s gotSpan) String() string {
	return fmt.Sprintf("%s %q (%s) trace %s span %s parent %s attrs %v", s.Service(), s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentID, s.Attrs)
}

// newOTLPReceiver starts a receiver, closed in t.Cleanup.
func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{t: t, changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// endpoint is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *otlpReceiver) endpoint() string { return r.srv.URL }

// env is the environment of a process that sends its spans here at once:
// every span sampled, batches sent every 50 ms.
func (r *otlpReceiver) env() []string {
	return otlpEnv(r.endpoint())
}

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

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "only POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer zr.Close()
		body = zr
	}
	raw, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		r.t.Errorf("OTLP receiver: undecodable export (%s): %v", req.Header.Get("Content-Type"), err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []gotSpan
	for _, rs := range msg.GetResourceSpans() {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, gotSpan{
					Resource: res,
					Attrs:    attrMap(s.GetAttributes()),
					Name:     s.GetName(),
					Kind:     s.GetKind(),
					TraceID:  hex.EncodeToString(s.GetTraceId()),
					SpanID:   hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()),
					Status:   s.GetStatus().GetCode(),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.requests++
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// attrMap flattens attributes to strings (arrays and maps as their proto
// text).
func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = fmt.Sprint(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// all returns every span received so far.
func (r *otlpReceiver) all() []gotSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]gotSpan(nil), r.spans...)
}

// requestCount is how many exports arrived.
func (r *otlpReceiver) requestCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// trace returns the spans of traceID.
func (r *otlpReceiver) trace(traceID string) []gotSpan {
	return filterSpans(r.all(), func(s gotSpan) bool { return s.TraceID == traceID })
}

// service returns the spans whose service.name is name.
func (r *otlpReceiver) service(name string) []gotSpan {
	return filterSpans(r.all(), func(s gotSpan) bool { return s.Service() == name })
}

// await waits until cond holds of the spans received and returns them; it
// fails t (the test or subtest waiting), naming what, when within passes
// first.
func (r *otlpReceiver) await(t testing.TB, within time.Duration, what string, cond func([]gotSpan) bool) []gotSpan {
	t.Helper()
	deadline := time.After(within)
	for {
		r.mu.Lock()
		spans, changed := append([]gotSpan(nil), r.spans...), r.changed
		r.mu.Unlock()
		if cond(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("OTLP receiver: no %s within %s; received:\n%s", what, within, spanList(spans))
		}
	}
}

// awaitSpan waits for a span matching match and returns it.
func (r *otlpReceiver) awaitSpan(t testing.TB, within time.Duration, what string, match func(gotSpan) bool) gotSpan {
	t.Helper()
	var found gotSpan
	r.await(t, within, what, func(spans []gotSpan) bool {
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

func filterSpans(spans []gotSpan, keep func(gotSpan) bool) []gotSpan {
	var out []gotSpan
	for _, s := range spans {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

func spanList(spans []gotSpan) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString("  " + s.String() + "\n")
	}
	return b.String()
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
