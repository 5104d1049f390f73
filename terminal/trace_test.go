//go:build !windows

package terminal_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/internal/tracing/tracingtest"
	"github.com/tetherdev/tether/terminal"
)

// TestAsyncCommandSpanLastsUntilTheCommandExits: an async command's
// terminal.exec span, under the call that started it, ends when the
// command exits, not when the call is answered, and records its exit code.
func TestAsyncCommandSpanLastsUntilTheCommandExits(t *testing.T) {
	rec := tracingtest.Record(t)

	m := newManager(t, terminal.Config{})
	ctx, call := otel.Tracer("test").Start(context.Background(), "call")
	r, err := m.Execute(ctx, terminal.ExecRequest{Command: "sleep 0.3; exit 5", Mode: terminal.ModeAsync, Hidden: true})
	call.End()
	if err != nil || r.Status != terminal.StatusRunning {
		t.Fatalf("execute = %+v, %v; want a running async session", r, err)
	}
	if n := len(rec.Ended()); n != 1 { // the call's own span only
		t.Fatalf("%d spans ended when the async call was answered, want only the call's", n)
	}
	var exec sdktrace.ReadOnlySpan
	testwait.Until(t, 10*time.Second, func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "terminal.exec" {
				exec = s
			}
		}
		return exec != nil
	}, "the terminal.exec span to end")
	a := map[string]string{}
	for _, kv := range exec.Attributes() {
		a[string(kv.Key)] = kv.Value.String()
	}
	if exec.Parent().SpanID() != call.SpanContext().SpanID() || a["process.exit.code"] != "5" || a["tether.exec.async"] != "true" {
		t.Errorf("terminal.exec parent %s attributes %v, want the call's span, exit code 5, async", exec.Parent().SpanID(), a)
	}
	if d := exec.EndTime().Sub(exec.StartTime()); d < 300*time.Millisecond {
		t.Errorf("terminal.exec lasted %v, want the command's 300ms at least", d)
	}
}
