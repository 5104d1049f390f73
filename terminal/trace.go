//go:build !windows

package terminal

import (
	"context"

	"github.com/tetherdev/tether/internal/tracing"
)

// tracerName names the terminal's spans' instrumentation scope.
const tracerName = "github.com/tetherdev/tether/terminal"

// traceExec starts the "terminal.exec" span of s, which has started, under
// the call's span in ctx, and ends it when s ends: the span lasts as long
// as the command, for an async command beyond the call that started it.
// It records where the command ran (visible or hidden terminal), whether
// it is async, its exit code, timeout and duration; never the command line
// or its output. When tracing is off it costs one atomic load.
func traceExec(ctx context.Context, s *session) {
	span := tracing.StartExec(ctx, tracerName, "terminal.exec", s.started,
		tracing.AttrExecRuntime.String(s.terminal), tracing.AttrExecAsync.Bool(s.async))
	if span == nil {
		return
	}
	s.whenDone(func() {
		s.mu.Lock()
		end := s.ended
		e := tracing.Exit{Code: s.exitCode, TimedOut: s.timedOut, Duration: end.Sub(s.started)}
		s.mu.Unlock()
		tracing.EndExec(span, end, e)
	})
}
