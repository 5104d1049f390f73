package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// leanExporter sends batches of spans to an OTLP/HTTP endpoint as
// protobuf encoded by appendRequest into a buffer it reuses, over one
// reused http.Client. It replaces otlptracehttp, whose conversion to proto
// structs, reflective marshal and per-export allocations were a tenth of a
// traced broker's CPU (BenchmarkTracingCost). It reads the
// OTEL_EXPORTER_OTLP_* variables tether documents (endpoint, headers,
// timeout, compression); a configuration it does not cover (a CA or
// client certificate for the collector) keeps the official exporter
// (newExporter). An endpoint answering 429, 502, 503 or 504 is retried
// after its Retry-After, or 5 s doubling up to 30 s, within the export's
// timeout, as the OTLP specification and the official exporter do; any
// other failure fails the batch, which countingExporter counts dropped.
type leanExporter struct {
	url      string
	headers  map[string]string
	gzip     bool
	timeout  time.Duration
	client   *http.Client
	mu       sync.Mutex // one export at a time: the buffers are reused
	buf      []byte
	zbuf     bytes.Buffer
	zw       *gzip.Writer
	shutdown bool
}

// otlpEnv returns the value of the traces-specific variable
// OTEL_EXPORTER_OTLP_TRACES_<name>, or else OTEL_EXPORTER_OTLP_<name>, and
// which of the two it read.
func otlpEnv(name string) (value, from string) {
	from = "OTEL_EXPORTER_OTLP_TRACES_" + name
	if v := strings.TrimSpace(os.Getenv(from)); v != "" {
		return v, from
	}
	from = "OTEL_EXPORTER_OTLP_" + name
	return strings.TrimSpace(os.Getenv(from)), from
}

// leanCovers reports whether the lean exporter covers the environment's
// configuration: it does not load certificates for TLS to the collector.
func leanCovers() bool {
	for _, n := range []string{"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		if v, _ := otlpEnv(n); v != "" {
			return false
		}
	}
	return true
}

// newLeanExporter reads the exporter's configuration from the environment;
// errors name the variable that is wrong.
func newLeanExporter() (*leanExporter, error) {
	e := &leanExporter{timeout: 10 * time.Second}
	if v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")); v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=%q: want an http:// or https:// URL", v)
		}
		e.url = u.String()
	} else {
		v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT=%q: want an http:// or https:// URL", v)
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		e.url = u.String()
	}
	if v, from := otlpEnv("HEADERS"); v != "" {
		e.headers = map[string]string{}
		for _, pair := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, fmt.Errorf("%s: %q is not key=value", from, strings.TrimSpace(pair))
			}
			dk, err1 := url.PathUnescape(k)
			dv, err2 := url.PathUnescape(strings.TrimSpace(val))
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: the entry for %q is not URL-encoded", from, k)
			}
			e.headers[dk] = dv
		}
	}
	if v, from := otlpEnv("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s=%q: want a positive number of milliseconds", from, v)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch v, from := otlpEnv("COMPRESSION"); strings.ToLower(v) {
	case "gzip":
		e.gzip = true
		e.zw = gzip.NewWriter(io.Discard)
	case "", "none":
	default:
		return nil, fmt.Errorf("%s=%q: want gzip or none", from, v)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2
	e.client = &http.Client{Transport: tr}
	return e, nil
}

// ExportSpans implements sdktrace.SpanExporter: export.
func (e *leanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	return e.export(ctx, asSpanData(spans))
}

// asSpanData is spans as the batcher queues them.
func asSpanData(spans []sdktrace.ReadOnlySpan) []spanData {
	data := make([]spanData, len(spans))
	for i, s := range spans {
		data[i] = s
	}
	return data
}

// export sends spans in one request, retrying as the type's comment says,
// within the exporter's timeout and ctx.
func (e *leanExporter) export(ctx context.Context, spans []spanData) error {
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shutdown {
		return errors.New("the OTLP exporter is shut down")
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	e.buf = appendRequest(e.buf[:0], spans)
	body := e.buf
	if e.gzip {
		e.zbuf.Reset()
		e.zw.Reset(&e.zbuf)
		_, _ = e.zw.Write(body)
		if err := e.zw.Close(); err != nil {
			return err
		}
		body = e.zbuf.Bytes()
	}
	backoff := 5 * time.Second
	for {
		retry, wait, err := e.post(ctx, body)
		if !retry {
			return err
		}
		if wait <= 0 {
			wait = backoff
			backoff = min(2*backoff, 30*time.Second)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err // the next try would come after the timeout
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// post sends one request. retry says whether the endpoint asked to be
// tried again (429, 502, 503, 504), and wait is its Retry-After.
func (e *leanExporter) post(ctx context.Context, body []byte) (retry bool, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return false, 0, err
	}
	// Drained (a little) so the connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, 0, nil
	case c == http.StatusTooManyRequests || c == http.StatusBadGateway || c == http.StatusServiceUnavailable || c == http.StatusGatewayTimeout:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			wait = time.Duration(s) * time.Second
		}
		return true, wait, fmt.Errorf("OTLP endpoint answered %s", resp.Status)
	default:
		return false, 0, fmt.Errorf("OTLP endpoint answered %s", resp.Status)
	}
}

// Shutdown stops exporting and closes the idle connections.
func (e *leanExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown = true
	e.client.CloseIdleConnections()
	return nil
}
