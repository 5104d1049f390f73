//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// Benchmarks report x_baseline: their cost per op divided by that of a
// baseline measured in the same run (as many iterations, right after the
// timed loop), because these machines are too noisy for absolute numbers to
// compare across runs.

var benchPayload = json.RawMessage(`{"session_id":"s-1","offset":1024,"note":"a small but typical payload"}`)

// BenchmarkDispatchPing measures the dispatcher (gin routing, decode, encode,
// bound, deadline) against the JSON work the ping route cannot avoid.
func BenchmarkDispatchPing(b *testing.B) {
	br := startBridge(b, bridge.Config{WorkspaceID: "bench"}, nil)
	call := protocol.ToolCall{CorrelationID: "c", Endpoint: protocol.PingEndpoint, Payload: benchPayload, Timeout: 30}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := br.Dispatch(ctx, call); !resp.Success {
			b.Fatalf("ping failed: %+v", resp)
		}
	}
	reportRatio(b, func(n int) {
		for range n {
			var raw json.RawMessage
			_ = json.Unmarshal(benchPayload, &raw)
			result, _ := json.Marshal(raw)
			_, _ = json.Marshal(protocol.Success("c", result))
		}
	})
}

// BenchmarkDispatchPingTraced is BenchmarkDispatchPing with tracing on:
// every call a span, batched to an exporter that drops them, so the
// figure is what the spans cost the call path.
func BenchmarkDispatchPingTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	defer tracing.UseProvider(tp)()
	BenchmarkDispatchPing(b)
}

// BenchmarkSocketPing measures one call at a time through the WebSocket
// client against a bare WebSocket echo of the same frame.
func BenchmarkSocketPing(b *testing.B) {
	frame := protocol.EncodeEvent(1, protocol.EventToolCall,
		mustJSON(b, protocol.ToolCall{CorrelationID: "c", Endpoint: protocol.PingEndpoint, Payload: benchPayload, Timeout: 30}))
	f := newFakeBroker(b, protocol.OpenInfo{})
	startBridge(b, bridge.Config{BrokerURL: f.url(), WorkspaceID: "bench"}, nil) // logging off
	c := f.accept(b)
	b.ReportAllocs()
	for b.Loop() {
		c.send(b, string(frame))
		if _, resp := c.response(b); !resp.Success {
			b.Fatalf("ping failed: %+v", resp)
		}
	}
	reportRatio(b, func(n int) { echo(b, frame, n) })
}

// echo round-trips frame n times through a bare coder/websocket echo server.
func echo(b *testing.B, frame []byte, n int) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for {
			typ, data, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			if err := ws.Write(r.Context(), typ, data); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, srv.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.CloseNow()
	for range n {
		if err := ws.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		if _, _, err := ws.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// reportRatio times baseline over as many iterations as the benchmark ran
// and reports the benchmark's cost relative to it.
func reportRatio(b *testing.B, baseline func(n int)) {
	n := b.N
	if n == 0 {
		return
	}
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(n)
	start := time.Now()
	baseline(n)
	basePerOp := float64(time.Since(start).Nanoseconds()) / float64(n)
	b.ReportMetric(perOp/basePerOp, "x_baseline")
}
