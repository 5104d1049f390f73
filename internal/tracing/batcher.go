package tracing

import (
	"context"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The batching of Setup's span processor, read from the OTEL_BSP_*
// variables as the SDK's batch processor reads them, with its defaults.
const (
	defaultMaxQueue      = 2048
	defaultMaxBatch      = 512
	defaultScheduleDelay = 5000 * time.Millisecond
	defaultExportTimeout = 30000 * time.Millisecond
)

// envInt returns the positive integer in the variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// batcher is the span processor of Setup: it queues ended, sampled spans
// and exports them in batches from one goroutine, which it wakes only when
// a batch is full or the schedule delay passed. It replaces the SDK's
// batch span processor, which hands every span to its goroutine over a
// channel: a goroutine wake-up per span, which perf showed as context
// switches worth ~0.8 µs of a traced broker's ~31 µs per call
// (BenchmarkTracingCost, e2e/bench: on/off x1.19-x1.23 with the SDK's,
// x1.17 with this one, medians of 9 runs).
//
// It keeps the number of spans queued or being exported below the queue
// size (OTEL_BSP_MAX_QUEUE_SIZE) and drops, counting, beyond it; an export
// that fails counts its spans dropped too. So
// tether_trace_spans_dropped_total is every sampled span that did not
// reach the endpoint, and an endpoint that is down never holds a call.
type batcher struct {
	exp     exporter
	dropped prometheus.Counter
	limit   int // OTEL_BSP_MAX_QUEUE_SIZE
	batch   int // OTEL_BSP_MAX_EXPORT_BATCH_SIZE
	delay   time.Duration
	timeout time.Duration

	mu      sync.Mutex
	queue   []spanData
	pending int // queued or being exported
	stopped bool

	kick     chan struct{} // a batch is full; buffered 1
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	exportMu sync.Mutex // one export at a time; guards out
	out      []spanData
}

// exporter is what the batcher exports to: the lean exporter, or an SDK
// exporter through sdkExporter.
type exporter interface {
	export(ctx context.Context, spans []spanData) error
	Shutdown(ctx context.Context) error
}

// sdkExporter exports through an SDK exporter (the official one, or a
// test's), which takes only the SDK's spans: leanSpans go to the lean
// exporter only (leanTracing).
type sdkExporter struct{ sdktrace.SpanExporter }

func (e sdkExporter) export(ctx context.Context, spans []spanData) error {
	ro := make([]sdktrace.ReadOnlySpan, 0, len(spans))
	for _, s := range spans {
		if r, ok := s.(sdktrace.ReadOnlySpan); ok {
			ro = append(ro, r)
		}
	}
	return e.ExportSpans(ctx, ro)
}

// newProcessor returns the span processor of Setup, exporting to exp, with
// the batching of OTEL_BSP_*.
func newProcessor(exp sdktrace.SpanExporter, dropped prometheus.Counter) *batcher {
	var to exporter = sdkExporter{exp}
	if l, ok := exp.(*leanExporter); ok {
		to = l
	}
	b := &batcher{
		exp:     to,
		dropped: dropped,
		limit:   envInt("OTEL_BSP_MAX_QUEUE_SIZE", defaultMaxQueue),
		delay:   time.Duration(envInt("OTEL_BSP_SCHEDULE_DELAY", int(defaultScheduleDelay/time.Millisecond))) * time.Millisecond,
		timeout: time.Duration(envInt("OTEL_BSP_EXPORT_TIMEOUT", int(defaultExportTimeout/time.Millisecond))) * time.Millisecond,
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	b.batch = min(envInt("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaultMaxBatch), b.limit)
	go b.run()
	return b
}

// OnStart implements sdktrace.SpanProcessor: nothing to do.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: it queues s if it is sampled.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.enqueue(s)
}

// enqueue queues s, an ended, sampled span, or counts it dropped when the
// queue is full. It wakes the export goroutine only when a batch is full.
func (b *batcher) enqueue(s spanData) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if b.pending >= b.limit {
		b.mu.Unlock()
		b.dropped.Inc()
		return
	}
	b.queue = append(b.queue, s)
	b.pending++
	full := len(b.queue) >= b.batch
	b.mu.Unlock()
	if full {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// run exports what is queued when a batch is full or the schedule delay
// passed, until Shutdown.
func (b *batcher) run() {
	defer close(b.done)
	t := time.NewTimer(b.delay)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-b.kick:
			b.exportQueued(context.Background(), false)
		case <-t.C:
			b.exportQueued(context.Background(), true)
			t.Reset(b.delay)
		}
	}
}

// exportQueued exports what is queued in batches: all of it, or (not
// all) the full batches, so that spans ending during an export wait for a
// full batch or the schedule delay rather than go out a few at a time.
func (b *batcher) exportQueued(ctx context.Context, all bool) {
	b.exportMu.Lock()
	defer b.exportMu.Unlock()
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.batch)
		if n == 0 || (!all && n < b.batch) {
			b.mu.Unlock()
			return
		}
		b.out = append(b.out[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.mu.Unlock()

		ectx, cancel := context.WithTimeout(ctx, b.timeout)
		err := b.exp.export(ectx, b.out)
		cancel()
		clear(b.out) // the spans are garbage now
		if err != nil {
			b.dropped.Add(float64(n))
			otel.Handle(err)
		}
		b.mu.Lock()
		b.pending -= n
		b.mu.Unlock()
	}
}

// ForceFlush implements sdktrace.SpanProcessor: it exports what is queued
// now.
func (b *batcher) ForceFlush(ctx context.Context) error {
	b.exportQueued(ctx, true)
	return ctx.Err()
}

// Shutdown implements sdktrace.SpanProcessor: it stops the export
// goroutine, exports what is queued within ctx, and shuts the exporter
// down. Spans ended after it are ignored.
func (b *batcher) Shutdown(ctx context.Context) error {
	var err error
	b.stopOnce.Do(func() {
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		b.exportQueued(ctx, true)
		err = b.exp.Shutdown(ctx)
	})
	return err
}
