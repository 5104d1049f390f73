//go:build !windows

// The bridge, which these benchmarks run in process, does not build on
// Windows (docs/platforms.md).

package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

// The in-process benchmarks run a broker on an httptest server and a real
// bridge connected to it over loopback WebSocket, and send /api/ping with a
// ~100 byte payload. Each compares itself with a net/http echo server driven
// the same way in the same run (STYLE.md, lesson 10): the x-echo metric is
// tether's time per call over the echo's. Allocations count the whole
// process: caller, broker and bridge.

var (
	benchSecret  = []byte("bench-secret-0123456789")
	benchPayload = json.RawMessage(`{"kind":"bench","text":"` + strings.Repeat("tether", 11) + `","seq":42,"ok":true}`)
	benchBody    = []byte(`{"endpoint":"/api/ping","payload":` + string(benchPayload) + `,"timeout":10}`)
)

// benchLogger logs what the tether binary logs by default in benchmarks
// (--log-level warn), to nowhere.
func benchLogger() zerolog.Logger { return zerolog.New(io.Discard).Level(zerolog.WarnLevel) }

// benchNoLeaks fails b if goroutines started after this call outlive it.
// Call it first: cleanups run last-registered first.
func benchNoLeaks(b *testing.B) {
	ignore := goleak.IgnoreCurrent()
	b.Cleanup(func() { goleak.VerifyNone(b, ignore) })
}

// benchRig is a broker with a bridge serving workspace "bench".
type benchRig struct {
	callURL string
	token   string // caller token
}

// newBenchRig starts a broker (on mem when it is not nil) and a bridge, and
// stops both in Cleanup.
func newBenchRig(b *testing.B, mem bus.Bus) *benchRig {
	b.Helper()
	brk, err := broker.New(broker.Config{Secret: benchSecret, Bus: mem, Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	// Served as the command serves it: the call server, net/http for the
	// bridge's WebSocket.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	server := broker.NewServer(brk, &http.Server{})
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()
	srv := struct{ URL string }{"http://" + ln.Addr().String()}
	btok := benchToken(b, auth.RoleBridge, "bench")
	br, err := bridge.New(bridge.Config{BrokerURL: srv.URL, WorkspaceID: "bench", Token: btok, Root: b.TempDir(), Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- br.Run(ctx) }()
	b.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			b.Errorf("bridge run: %v", err)
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := brk.Shutdown(sctx); err != nil {
			b.Errorf("broker shutdown: %v", err)
		}
		if err := server.Shutdown(sctx); err != nil {
			b.Errorf("server shutdown: %v", err)
		}
		if err := <-served; err != http.ErrServerClosed {
			b.Errorf("serve: %v", err)
		}
	})
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := br.WaitConnected(wctx); err != nil {
		b.Fatalf("bridge did not connect: %v", err)
	}
	return &benchRig{callURL: srv.URL + "/api/v1/workspaces/bench/calls", token: benchToken(b, auth.RoleCaller, "bench")}
}

func benchToken(b *testing.B, role, ws string) string {
	tok, err := auth.IssueToken(benchSecret, role, []string{ws}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

// benchEchoServer is the baseline: one hop that reads the call and answers
// a ToolResponse carrying its payload.
func benchEchoServer(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var call protocol.ToolCall
		if err := json.Unmarshal(body, &call); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, _ := json.Marshal(struct {
			Success bool            `json:"success"`
			Result  json.RawMessage `json:"result"`
		}{true, call.Payload})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/calls"
}

// benchClient is a keep-alive client for up to conns parallel calls.
func benchClient(b *testing.B, conns int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        2 * conns,
		MaxIdleConnsPerHost: 2 * conns,
		DisableCompression:  true,
	}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// benchPost sends one call and checks that it echoed the payload.
func benchPost(client *http.Client, url, token string, buf *bytes.Buffer) error {
	if err := benchRequest(client, http.MethodPost, url, token, benchBody, http.StatusOK, buf); err != nil {
		return err
	}
	var resp struct {
		Success bool            `json:"success"`
		Error   string          `json:"error"`
		Result  json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(buf.Bytes(), &resp); err != nil {
		return fmt.Errorf("decoding %.300q: %w", buf.Bytes(), err)
	}
	if !resp.Success || !bytes.Equal(resp.Result, benchPayload) {
		return fmt.Errorf("answer is not the echo: %.300s", buf.Bytes())
	}
	return nil
}

// benchRequest sends one request (a JSON body unless body is nil) and reads
// its answer into buf; an answer with another status than want is an error.
func benchRequest(client *http.Client, method, url, token string, body []byte, want int, buf *bytes.Buffer) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	buf.Reset()
	_, err = buf.ReadFrom(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: HTTP %d: %.300s", method, url, res.StatusCode, buf.Bytes())
	}
	return nil
}

// benchBaseline runs the echo baseline as sub-benchmark "echo" and returns
// a pointer to its time per call, filled in once it has run.
func benchBaseline(b *testing.B, run func(b *testing.B, url, token string)) *float64 {
	var nsPerOp float64
	b.Run("echo", func(b *testing.B) {
		run(b, benchEchoServer(b), "")
		nsPerOp = benchNsPerOp(b)
	})
	return &nsPerOp
}

func benchNsPerOp(b *testing.B) float64 {
	if b.N == 0 {
		return 0
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// benchReportRatio reports x-echo: this sub-benchmark's time per call over
// the baseline's.
func benchReportRatio(b *testing.B, baseline *float64) {
	if *baseline > 0 {
		b.ReportMetric(benchNsPerOp(b)/(*baseline), "x-echo")
	}
}

// benchSerial sends calls to url one at a time until b is done.
func benchSerial(b *testing.B, url, token string) {
	client := benchClient(b, 1)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		if err := benchPost(client, url, token, &buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInProcessRoundTrip: one caller at a time, HTTP POST to the broker,
// tool_call over WebSocket to the bridge, its ack back, HTTP answer.
func BenchmarkInProcessRoundTrip(b *testing.B) {
	baseline := benchBaseline(b, benchSerial)
	b.Run("tether", func(b *testing.B) {
		benchNoLeaks(b)
		rig := newBenchRig(b, nil)
		benchSerial(b, rig.callURL, rig.token)
		benchReportRatio(b, baseline)
	})
}

// benchParallelism makes RunParallel use 64 goroutines on 2 CPUs, the
// issue's highest concurrency.
const benchParallelism = 32

// BenchmarkInProcessRoundTripParallel is BenchmarkInProcessRoundTrip with
// 32×GOMAXPROCS callers at once; ns/op is wall time over calls, the inverse
// of throughput.
func BenchmarkInProcessRoundTripParallel(b *testing.B) {
	parallel := func(b *testing.B, url, token string) {
		client := benchClient(b, benchParallelism*8)
		b.ReportAllocs()
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var buf bytes.Buffer
			for pb.Next() {
				if err := benchPost(client, url, token, &buf); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	baseline := benchBaseline(b, parallel)
	b.Run("tether", func(b *testing.B) {
		benchNoLeaks(b)
		rig := newBenchRig(b, nil)
		parallel(b, rig.callURL, rig.token)
		benchReportRatio(b, baseline)
	})
}

// BenchmarkBusCallerRoundTrip skips the HTTP API: a caller.BusCaller on the
// broker's in-memory bus publishes the call the way the API does, so the
// difference to BenchmarkInProcessRoundTrip is the API's cost (HTTP, gin,
// token check, request decoding) plus the HTTP client's.
func BenchmarkBusCallerRoundTrip(b *testing.B) {
	baseline := benchBaseline(b, benchSerial)
	b.Run("tether", func(b *testing.B) {
		benchNoLeaks(b)
		mem := bus.NewMemory()
		b.Cleanup(func() { _ = mem.Close() }) // after the broker's shutdown
		newBenchRig(b, mem)
		ctx := context.Background()
		c, err := caller.NewBusCaller(ctx, mem, caller.BusCallerOptions{Logger: benchLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		req := caller.Request{WorkspaceID: "bench", Endpoint: "/api/ping", Payload: benchPayload, Timeout: 10 * time.Second}
		b.ReportAllocs()
		for b.Loop() {
			resp := c.Call(ctx, req)
			if !resp.Success || !bytes.Equal(resp.Result, benchPayload) {
				b.Fatalf("answer is not the echo: %+v", resp)
			}
		}
		benchReportRatio(b, baseline)
	})
}

// BenchmarkInProcessAsyncRoundTrip is BenchmarkInProcessRoundTrip as an
// async call: POST .../calls with "async":true, then GET
// /api/v1/calls/{id}?wait=10 until the outcome, on the broker's in-memory
// store. x-echo compares the two requests with one echo.
func BenchmarkInProcessAsyncRoundTrip(b *testing.B) {
	baseline := benchBaseline(b, benchSerial)
	b.Run("tether", func(b *testing.B) {
		benchNoLeaks(b)
		rig := newBenchRig(b, nil)
		client := benchClient(b, 1)
		base := strings.TrimSuffix(rig.callURL, "/workspaces/bench/calls")
		body := []byte(`{"endpoint":"/api/ping","payload":` + string(benchPayload) + `,"timeout":10,"async":true}`)
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			if err := benchAsync(client, rig.callURL, base, rig.token, body, &buf); err != nil {
				b.Fatal(err)
			}
		}
		benchReportRatio(b, baseline)
	})
}

// benchAsync submits one async call and waits for its outcome, which must
// be the echo.
func benchAsync(client *http.Client, callURL, base, token string, body []byte, buf *bytes.Buffer) error {
	if err := benchRequest(client, http.MethodPost, callURL, token, body, http.StatusAccepted, buf); err != nil {
		return err
	}
	var rec struct {
		CorrelationID string `json:"correlation_id"`
		Status        string `json:"status"`
		Response      *struct {
			Success bool            `json:"success"`
			Result  json.RawMessage `json:"result"`
		} `json:"response"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		return fmt.Errorf("decoding %.300q: %w", buf.Bytes(), err)
	}
	for rec.Response == nil {
		if err := benchRequest(client, http.MethodGet, base+"/calls/"+rec.CorrelationID+"?wait=10", token, nil, http.StatusOK, buf); err != nil {
			return err
		}
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			return fmt.Errorf("decoding %.300q: %w", buf.Bytes(), err)
		}
	}
	if rec.Status != "succeeded" || !rec.Response.Success || !bytes.Equal(rec.Response.Result, benchPayload) {
		return fmt.Errorf("outcome is not the echo: %.300s", buf.Bytes())
	}
	return nil
}
