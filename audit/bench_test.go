package audit_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/tetherdev/tether/audit"
)

// BenchmarkEmit is what a call pays for its audit line: encoding it and
// queueing it (the writer, to io.Discard here, runs on its own goroutine).
func BenchmarkEmit(b *testing.B) {
	l := audit.New(io.Discard, audit.Options{Instance: "b1", Component: "broker", Queue: 1 << 16})
	defer func() { _ = l.Close(context.Background()) }()
	e := audit.Event{Event: audit.Call, Door: audit.DoorHTTP, Remote: "127.0.0.1:40000", Workspace: "ws",
		Principal: &audit.Principal{Sub: "alice", JTI: "54d9dfe1-5da6-4a58-8765-cdeb12701b6f", KID: "k1", Role: "caller"},
		Endpoint:  "/api/terminal/execute", CorrelationID: "4e8e04ab-7d17-471b-b2e5-06a8f3ae3673", Outcome: audit.OutcomeOK, Status: 200, DurationMS: 11.4}
	b.ReportAllocs()
	for b.Loop() {
		e.Time = time.Time{}
		l.Emit(e)
	}
}
