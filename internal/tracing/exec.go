package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The span of a command the workspace side runs for a call
// ("terminal.exec", "sandbox.exec"): where it ran, how it ended and how
// long it took. Never the command line, its environment or its output,
// which are the caller's payload (the audit log records command lines).
const (
	// AttrExecRuntime is where the command ran: "visible" or "hidden"
	// (terminal), "subprocess" or "bwrap" (sandbox).
	AttrExecRuntime = attribute.Key("tether.exec.runtime")
	// AttrExecAsync marks a command started in the background.
	AttrExecAsync = attribute.Key("tether.exec.async")
	// AttrExitCode is the command's exit code (-1 if it had not ended).
	AttrExitCode = attribute.Key("process.exit.code")
	// AttrExecTimedOut: the timeout or a cancellation ended it.
	AttrExecTimedOut = attribute.Key("tether.exec.timed_out")
	// AttrExecDurationMS is how long it ran, in milliseconds.
	AttrExecDurationMS = attribute.Key("tether.exec.duration_ms")
)

// StartExec starts the span name of a command run by the package named
// tracer, beneath the span in ctx, from start; nil when tracing is off.
func StartExec(ctx context.Context, tracer, name string, start time.Time, attrs ...attribute.KeyValue) trace.Span {
	if !On() {
		return nil
	}
	_, span := otel.Tracer(tracer).Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	return span
}

// Exit is how a command ended, for EndExec.
type Exit struct {
	Code     int
	TimedOut bool
	Duration time.Duration
	// Failed: the command could not be run or waited for. Why stays out
	// of the span: the error's text may quote the command line.
	Failed bool
}

// EndExec records how the command ended and ends span at end; a nil span
// is a no-op. A non-zero exit code, a timeout or an error is the span's
// error status.
func EndExec(span trace.Span, end time.Time, e Exit) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrExitCode.Int(e.Code), AttrExecTimedOut.Bool(e.TimedOut),
		AttrExecDurationMS.Int64(e.Duration.Milliseconds()))
	switch {
	case e.Failed:
		span.SetStatus(codes.Error, "the command could not be run")
	case e.TimedOut:
		span.SetStatus(codes.Error, "timed out")
	case e.Code != 0:
		span.SetStatus(codes.Error, "non-zero exit code")
	}
	span.End(trace.WithTimestamp(end))
}
