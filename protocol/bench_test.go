package protocol_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// A typical tool_call body as the broker marshals it: about 200 bytes.
var benchCallBody = func() json.RawMessage {
	b, err := json.Marshal(protocol.ToolCall{
		CorrelationID: "0b9d6f3e-5c1a-4f7e-9a2b-8d4c3e2f1a0b",
		Endpoint:      "/fs/read",
		Payload:       json.RawMessage(`{"path":"/workspace/src/internal/server/handler.go","offset":0,"limit":65536,"encoding":"utf-8"}`),
		Timeout:       30,
	})
	if err != nil {
		panic(err)
	}
	return b
}()

// The ack a client sends back for it (Engine.IO prefix already stripped).
var benchAck = []byte(`3123[{"correlation_id":"0b9d6f3e-5c1a-4f7e-9a2b-8d4c3e2f1a0b","success":true,` +
	`"result":{"content":"package server\n\nimport \"net/http\"\n","size":34,"truncated":false}}]`)

// Each benchmark also reports its time as a ratio to a plain encoding/json
// baseline (x_baseline). The baseline runs as many iterations right after
// the timed loop, outside the timer, so both see the same machine load: on
// these shared machines absolute ns/op do not compare across runs.
func reportRatio(b *testing.B, n int, baseline func()) {
	if n == 0 {
		return
	}
	codec := b.Elapsed()
	start := time.Now()
	for range n {
		baseline()
	}
	if base := time.Since(start); base > 0 {
		b.ReportMetric(float64(codec)/float64(base), "x_baseline")
	}
}

// benchSink keeps the compiler from discarding baseline work.
var benchSink []byte

// Baseline: what any decoder has to pay at least, one json.Valid over the
// payload.
func BenchmarkDecodeSIOAck(b *testing.B) {
	b.SetBytes(int64(len(benchAck)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		p, err := protocol.DecodeSIO(benchAck)
		if err != nil || p.ID != 123 {
			b.Fatal(p, err)
		}
		n++
	}
	payload := benchAck[4:]
	reportRatio(b, n, func() {
		if !json.Valid(payload) {
			b.Fatal("invalid baseline payload")
		}
	})
}

// Baseline: the obvious encoding/json way, marshalling ["tool_call", body]
// and prefixing "42" and the ack id.
func BenchmarkEncodeEventToolCall(b *testing.B) {
	b.SetBytes(int64(len(benchCallBody)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if frame := protocol.EncodeEvent(123, protocol.EventToolCall, benchCallBody); len(frame) < len(benchCallBody) {
			b.Fatal("short frame")
		}
		n++
	}
	reportRatio(b, n, func() {
		payload, err := json.Marshal([]any{protocol.EventToolCall, benchCallBody})
		if err != nil {
			b.Fatal(err)
		}
		benchSink = append(strconv.AppendInt([]byte("42"), 123, 10), payload...)
	})
}
