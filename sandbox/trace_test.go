//go:build !windows

package sandbox_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tetherdev/tether/internal/tracing/tracingtest"
	"github.com/tetherdev/tether/sandbox"
)

// TestExecIsASpanWithRuntimeAndExitCode: with tracing on, a sandbox
// command is a sandbox.exec span under the caller's span, naming the
// runtime and the exit code, never the command line or its output.
func TestExecIsASpanWithRuntimeAndExitCode(t *testing.T) {
	rec := tracingtest.Record(t)

	e := newEnv(t, nil)
	ws := e.acquire(editReq(makeOrigin(t, nil), "traced"))
	ctx, call := otel.Tracer("test").Start(context.Background(), "call")
	res, err := e.svc.Exec(ctx, ws.WorkspaceID, sandbox.ExecRequest{Command: "echo secret-out-k2; exit 4"})
	call.End()
	if err != nil || res.ExitCode != 4 {
		t.Fatalf("exec = %+v, %v; want exit code 4", res, err)
	}
	var exec sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "sandbox.exec" {
			exec = s
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.String(); strings.Contains(v, "secret-out-k2") || strings.Contains(v, "echo") {
				t.Errorf("span %s attribute %s = %q holds the command or its output", s.Name(), kv.Key, v)
			}
		}
	}
	if exec == nil {
		t.Fatal("no sandbox.exec span")
	}
	if exec.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Errorf("sandbox.exec parent %s, want the call's %s", exec.Parent().SpanID(), call.SpanContext().SpanID())
	}
	a := map[string]string{}
	for _, kv := range exec.Attributes() {
		a[string(kv.Key)] = kv.Value.String()
	}
	if a["process.exit.code"] != "4" || a["tether.exec.runtime"] != "subprocess" || a["tether.exec.timed_out"] != "false" || a["tether.exec.duration_ms"] == "" {
		t.Errorf("sandbox.exec attributes %v, want exit code 4, runtime subprocess, not timed out, a duration", a)
	}
	if exec.Status().Code != codes.Error {
		t.Errorf("status %v, want error for a non-zero exit", exec.Status())
	}
}
