package protocol_test

import (
	"bytes"
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

// The broker's path for a client's answer: the ack packet, its arguments and
// the response in the first one. Baseline: the same with encoding/json
// (unmarshal the arguments, then the response).
func BenchmarkDecodeAckResponse(b *testing.B) {
	b.SetBytes(int64(len(benchAck)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		p, err := protocol.DecodeSIO(benchAck)
		if err != nil {
			b.Fatal(err)
		}
		args, err := p.Args()
		if err != nil || len(args) != 1 {
			b.Fatal(args, err)
		}
		resp, ok, err := protocol.DecodeResponse(args[0])
		if err != nil || !ok || !resp.Success {
			b.Fatal(resp, ok, err)
		}
		n++
	}
	payload := benchAck[4:]
	reportRatio(b, n, func() {
		var args []json.RawMessage
		if err := json.Unmarshal(payload, &args); err != nil || len(args) != 1 {
			b.Fatal(args, err)
		}
		var resp protocol.ToolResponse
		if err := json.Unmarshal(args[0], &resp); err != nil || !resp.Success {
			b.Fatal(resp, err)
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

// A call as it travels on the bus between brokers (about 300 bytes).
var benchCall = protocol.ToolCall{
	CorrelationID:      "0b9d6f3e-5c1a-4f7e-9a2b-8d4c3e2f1a0b",
	Endpoint:           "/fs/read",
	Payload:            json.RawMessage(`{"path":"/workspace/src/internal/server/handler.go","offset":0,"limit":65536,"encoding":"utf-8"}`),
	Timeout:            30,
	ReplyTo:            "reply:broker-7f3a9c2e:17",
	DeadlineMS:         1767225630000,
	WaitForWorkspaceMS: 5000,
}

// A client's answer to it (about 300 bytes).
var benchResponse = protocol.ToolResponse{
	CorrelationID: "0b9d6f3e-5c1a-4f7e-9a2b-8d4c3e2f1a0b",
	Success:       true,
	Result: json.RawMessage(`{"content":"package server\n\nimport \"net/http\"\n\n// Handler answers every request.\n` +
		`func Handler(w http.ResponseWriter, r *http.Request) {\n\tw.WriteHeader(200)\n}\n","size":131,"truncated":false}`),
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var (
	benchCallJSON     = mustMarshal(benchCall)
	benchResponseJSON = mustMarshal(benchResponse)
	benchBusJSON      = mustMarshal(protocol.BusMessage{ToolCall: benchCall})
	benchEventJSON    = append(append([]byte(`["tool_response",`), benchResponseJSON...), ']')
)

// Baseline: json.Unmarshal into the same type.
func BenchmarkDecodeToolCall(b *testing.B) {
	b.SetBytes(int64(len(benchCallJSON)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		var c protocol.ToolCall
		if err := protocol.DecodeToolCall(benchCallJSON, &c); err != nil || c.DeadlineMS == 0 {
			b.Fatal(c, err)
		}
		n++
	}
	reportRatio(b, n, func() {
		var c protocol.ToolCall
		if err := json.Unmarshal(benchCallJSON, &c); err != nil {
			b.Fatal(err)
		}
	})
}

// The caller API's body: the strict decoder against json.Unmarshal into
// the same type (which ignores unknown fields; a strict json.Decoder costs
// more still).
func BenchmarkDecodeCallRequest(b *testing.B) {
	body := mustMarshal(protocol.ToolCall{CorrelationID: benchCall.CorrelationID, Endpoint: benchCall.Endpoint,
		Payload: benchCall.Payload, Timeout: benchCall.Timeout})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		var c protocol.ToolCall
		if err := protocol.DecodeCallRequest(body, &c); err != nil || c.Endpoint == "" {
			b.Fatal(c, err)
		}
		n++
	}
	reportRatio(b, n, func() {
		var c protocol.ToolCall
		if err := json.Unmarshal(body, &c); err != nil {
			b.Fatal(err)
		}
	})
}

// Baseline: json.Unmarshal into the same type.
func BenchmarkDecodeBusMessage(b *testing.B) {
	b.SetBytes(int64(len(benchBusJSON)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		var m protocol.BusMessage
		if err := protocol.DecodeBusMessage(benchBusJSON, &m); err != nil || m.DeadlineMS == 0 {
			b.Fatal(m, err)
		}
		n++
	}
	reportRatio(b, n, func() {
		var m protocol.BusMessage
		if err := json.Unmarshal(benchBusJSON, &m); err != nil {
			b.Fatal(err)
		}
	})
}

// Baseline: json.Unmarshal into the same type.
func BenchmarkDecodeToolResponse(b *testing.B) {
	b.SetBytes(int64(len(benchResponseJSON)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		var r protocol.ToolResponse
		if err := protocol.DecodeToolResponse(benchResponseJSON, &r); err != nil || !r.Success {
			b.Fatal(r, err)
		}
		n++
	}
	reportRatio(b, n, func() {
		var r protocol.ToolResponse
		if err := json.Unmarshal(benchResponseJSON, &r); err != nil {
			b.Fatal(err)
		}
	})
}

// The encoders append to a buffer the caller reuses. Baseline: json.Marshal.
func BenchmarkAppendToolCall(b *testing.B) {
	b.SetBytes(int64(len(benchCallJSON)))
	b.ReportAllocs()
	var buf []byte
	n := 0
	for b.Loop() {
		buf = protocol.AppendToolCall(buf[:0], &benchCall)
		n++
	}
	if !bytes.Equal(buf, benchCallJSON) {
		b.Fatalf("AppendToolCall = %s, want %s", buf, benchCallJSON)
	}
	reportRatio(b, n, func() { benchSink, _ = json.Marshal(&benchCall) })
}

// Baseline: json.Marshal.
func BenchmarkAppendBusMessage(b *testing.B) {
	m := protocol.BusMessage{ToolCall: benchCall}
	b.SetBytes(int64(len(benchBusJSON)))
	b.ReportAllocs()
	var buf []byte
	n := 0
	for b.Loop() {
		buf = protocol.AppendBusMessage(buf[:0], &m)
		n++
	}
	if !bytes.Equal(buf, benchBusJSON) {
		b.Fatalf("AppendBusMessage = %s, want %s", buf, benchBusJSON)
	}
	reportRatio(b, n, func() { benchSink, _ = json.Marshal(&m) })
}

// Baseline: json.Marshal.
func BenchmarkAppendToolResponse(b *testing.B) {
	b.SetBytes(int64(len(benchResponseJSON)))
	b.ReportAllocs()
	var buf []byte
	n := 0
	for b.Loop() {
		buf = protocol.AppendToolResponse(buf[:0], &benchResponse)
		n++
	}
	if !bytes.Equal(buf, benchResponseJSON) {
		b.Fatalf("AppendToolResponse = %s, want %s", buf, benchResponseJSON)
	}
	reportRatio(b, n, func() { benchSink, _ = json.Marshal(&benchResponse) })
}

// Baseline: json.Valid.
func BenchmarkValid(b *testing.B) {
	b.SetBytes(int64(len(benchResponseJSON)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if !protocol.Valid(benchResponseJSON) {
			b.Fatal("invalid")
		}
		n++
	}
	reportRatio(b, n, func() {
		if !json.Valid(benchResponseJSON) {
			b.Fatal("invalid")
		}
	})
}

// A tool_response event's arguments. Baseline: json.Unmarshal into
// []json.RawMessage.
func BenchmarkSplitArray(b *testing.B) {
	b.SetBytes(int64(len(benchEventJSON)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if args, err := protocol.SplitArray(benchEventJSON); err != nil || len(args) != 2 {
			b.Fatal(args, err)
		}
		n++
	}
	reportRatio(b, n, func() {
		var args []json.RawMessage
		if err := json.Unmarshal(benchEventJSON, &args); err != nil {
			b.Fatal(err)
		}
	})
}
