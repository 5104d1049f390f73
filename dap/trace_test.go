//go:build !windows

package dap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/internal/tracing/tracingtest"
)

func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestFailedRequestSpanCarriesTheAdapterMessage: a request the adapter
// refuses (evaluating a name that does not exist, with the built-in Node
// adapter) is a dap.evaluate span with an error status and the adapter's
// message, cut short, as its outcome; the request's arguments are in no
// attribute.
func TestFailedRequestSpanCarriesTheAdapterMessage(t *testing.T) {
	rec := tracingtest.Record(t)
	root := nodeWorkspace(t, "calc.js")
	m := newManager(t, root)
	needAdapter(t, m, "node")
	ctx := ctxFor(t, 30*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "javascript", Program: "calc.js", StopOnEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID})
	s, _ := m.Session(start.SessionID)
	cctx, call := otel.Tracer("test").Start(ctx, "call")
	r, err := s.Evaluate(cctx, dap.EvaluateRequest{Expression: "no_such_name_" + strings.Repeat("z", 300)})
	call.End()
	if err != nil || r.Error == "" {
		t.Fatalf("evaluate = %+v, %v; want the adapter's failure", r, err)
	}
	var eval sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Name() == "dap.evaluate" && sp.Parent().SpanID() == call.SpanContext().SpanID() {
			eval = sp
		}
	}
	if eval == nil {
		t.Fatal("no dap.evaluate span under the call")
	}
	outcome := spanAttr(eval, "dap.outcome")
	if eval.Status().Code != codes.Error || outcome == "" || outcome == "success" || len(outcome) > 204 {
		t.Errorf("dap.evaluate status %v, outcome %q (%d bytes); want an error with the adapter's message, at most 200 bytes and …",
			eval.Status(), outcome, len(outcome))
	}
	if spanAttr(eval, "dap.command") != "evaluate" || spanAttr(eval, "dap.adapter") != "node" {
		t.Errorf("dap.evaluate attributes %v", eval.Attributes())
	}
}

// TestChildSessionRequestsHangUnderTheStartCall: the requests of a
// js-debug child session, which the session makes after start-session
// answered and outside any call, are spans under the start call's span.
func TestChildSessionRequestsHangUnderTheStartCall(t *testing.T) {
	rec := tracingtest.Record(t)
	root := nodeWorkspace(t, "calc.js")
	bin := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "js-debug-adapter")); err != nil {
		t.Fatal(err)
	}
	transcript, _ := filepath.Abs("testdata/jsdebug_transcript.json")
	m, err := dap.NewManager(dap.Config{Root: root, Path: bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		Environ: append(os.Environ(), fakeJSDebugEnv+"="+transcript)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ctx := ctxFor(t, 30*time.Second)
	sctx, call := otel.Tracer("test").Start(ctx, "start call")
	start, err := m.Start(sctx, dap.StartRequest{Language: "javascript", Program: "calc.js",
		Breakpoints: []dap.FileBreakpoints{{Path: "calc.js", Breakpoints: []dap.SourceBreakpoint{{Line: 6}}}}})
	call.End()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID})
	// Two connections, each initialized and launched: the parent's during
	// the call, the child's after it.
	count := func(name string) int {
		n := 0
		for _, s := range rec.Ended() {
			if s.Name() == name && s.Parent().SpanID() == call.SpanContext().SpanID() && spanAttr(s, "dap.adapter") == "node" {
				n++
			}
		}
		return n
	}
	testwait.Until(t, 15*time.Second, func() bool { return count("dap.initialize") == 2 && count("dap.configurationDone") == 2 },
		"the child session's initialize and configurationDone spans under the start call")
}
