package tracing

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// defaultMaxQueue is the SDK's default OTEL_BSP_MAX_QUEUE_SIZE.
const defaultMaxQueue = 2048

// maxQueue returns the batch processor's queue size as the SDK reads it
// from OTEL_BSP_MAX_QUEUE_SIZE.
func maxQueue() int64 {
	if n, err := strconv.Atoi(os.Getenv("OTEL_BSP_MAX_QUEUE_SIZE")); err == nil && n > 0 {
		return int64(n)
	}
	return defaultMaxQueue
}

// bounded sits in front of the SDK's batch span processor and counts the
// spans dropped because the export is behind: the batch processor drops
// them silently when its queue is full. It keeps the number of spans
// handed on and not yet exported (or failed) below the batch processor's
// queue size and drops, counting, beyond it, so the batch processor's own
// queue never overflows and every span it gets reaches the exporter. With
// countingExporter, tether_trace_spans_dropped_total is then every span
// that did not reach the endpoint.
type bounded struct {
	sdktrace.SpanProcessor
	limit   int64
	pending *atomic.Int64 // handed on, not yet through ExportSpans
	dropped prometheus.Counter
}

func (b *bounded) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor ignores these too
	}
	if b.pending.Add(1) > b.limit {
		b.pending.Add(-1)
		b.dropped.Inc()
		return
	}
	b.SpanProcessor.OnEnd(s)
}

// countingExporter counts the spans of every batch the endpoint refused or
// could not be reached for, and tells bounded that a batch is through.
type countingExporter struct {
	sdktrace.SpanExporter
	pending *atomic.Int64
	dropped prometheus.Counter
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.pending.Add(-int64(len(spans)))
	if err != nil {
		e.dropped.Add(float64(len(spans)))
	}
	return err
}

// newProcessor returns the span processor of Setup: the SDK's batch
// processor (OTEL_BSP_*) exporting to exp, behind bounded.
func newProcessor(exp sdktrace.SpanExporter, dropped prometheus.Counter) sdktrace.SpanProcessor {
	pending := new(atomic.Int64)
	bsp := sdktrace.NewBatchSpanProcessor(&countingExporter{SpanExporter: exp, pending: pending, dropped: dropped})
	return &bounded{SpanProcessor: bsp, limit: maxQueue(), pending: pending, dropped: dropped}
}
