//go:build !windows

package dap

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/internal/tracing"
)

// Request spans. When tracing is on, every request the bridge sends to a
// debug adapter is a Client span "dap.<command>", a child of the span in
// the ctx it was sent with: the bridge's call span for requests a debug
// call makes. Two kinds of request are made outside a call:
//
//   - A child session's start (session_children.go: initialize, launch,
//     breakpoints, configurationDone), sent when the adapter asks for it
//     after start-session answered: its spans hang under the span of the
//     start-session call that launched the session (Session.startSpan),
//     so the trace of a start shows everything it set in motion.
//   - The disconnect of a session stopped because the bridge is shutting
//     down (Manager.Close): it has no call, and is a root span of its own.
//
// The span ends when the response comes (or the connection ends), even if
// its caller stopped waiting. Attributes name the command, the adapter and
// the request's seq, and the outcome: "success" or the adapter's error
// message, cut to maxOutcome bytes. Never the arguments, which hold program
// arguments, environment and expressions.
const (
	attrCommand = attribute.Key("dap.command")
	attrAdapter = attribute.Key("dap.adapter")
	attrSeq     = attribute.Key("dap.seq")
	attrOutcome = attribute.Key("dap.outcome")

	tracerName = "github.com/tetherdev/tether/dap"

	// maxOutcome bounds the adapter's error message in a span.
	maxOutcome = 200
)

// startRequestSpan starts the span of request seq, or returns nil when
// tracing is off (one atomic load).
func (c *Client) startRequestSpan(ctx context.Context, command string, seq int) trace.Span {
	if !tracing.On() {
		return nil
	}
	_, span := otel.Tracer(tracerName).Start(ctx, "dap."+command,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrCommand.String(command), attrAdapter.String(c.adapter), attrSeq.Int(seq)))
	return span
}

// endRequestSpan ends span with the response m, or with err when there is
// no response (the request was never sent, or the connection ended). A nil
// span is a no-op.
func endRequestSpan(span trace.Span, m *Message, err error) {
	if span == nil {
		return
	}
	switch {
	case m != nil && m.Success:
		span.SetAttributes(attrOutcome.String("success"))
	case m != nil:
		msg := (&ResponseError{Message: m.Message, Body: m.Body}).reason()
		span.SetAttributes(attrOutcome.String(truncate(msg, maxOutcome)))
		span.SetStatus(codes.Error, truncate(msg, maxOutcome))
	default:
		msg := "no response"
		if err != nil {
			msg = err.Error()
		}
		span.SetAttributes(attrOutcome.String(truncate(msg, maxOutcome)))
		span.SetStatus(codes.Error, truncate(msg, maxOutcome))
	}
	span.End()
}

// truncate cuts s to at most n bytes, not inside a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// startSpanContext is the span a session's requests made outside any call
// hang under: the start-session call's.
func startSpanContext(ctx context.Context, sc trace.SpanContext) context.Context {
	if !sc.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, sc)
}
