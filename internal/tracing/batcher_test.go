package tracing

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tetherdev/tether/internal/testwait"
)

// fakeStuckExporter holds every export until released: an endpoint that
// accepts and never answers.
type fakeStuckExporter struct {
	release  chan struct{}
	exported atomic.Int64
}

func (e *fakeStuckExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.exported.Add(int64(len(spans)))
	return nil
}

func (e *fakeStuckExporter) Shutdown(context.Context) error { return nil }

func TestEverySpanIsExportedOrCountedDroppedWhenTheQueueIsFull(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
	exp := &fakeStuckExporter{release: make(chan struct{})}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(newProcessor(exp, dropped)))
	tr := tp.Tracer("test")
	const spans = 50
	for range spans {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
	if d := testutil.ToFloat64(dropped); d < spans-4 {
		t.Fatalf("%v spans counted dropped with a stuck exporter and a queue of 4; want at least %d", d, spans-4)
	}
	close(exp.release)
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := exp.exported.Load() + int64(testutil.ToFloat64(dropped)); got != spans {
		t.Fatalf("exported %d + dropped %v = %d; want every one of %d spans accounted for", exp.exported.Load(), testutil.ToFloat64(dropped), got, spans)
	}
}

// recordingExporter records the size of every batch it is given and when.
type recordingExporter struct {
	mu      sync.Mutex
	batches []int
	at      []time.Time
}

func (e *recordingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.batches = append(e.batches, len(spans))
	e.at = append(e.at, time.Now())
	return nil
}

func (e *recordingExporter) Shutdown(context.Context) error { return nil }

func (e *recordingExporter) seen() ([]int, []time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.batches...), append([]time.Time(nil), e.at...)
}

func TestBatcherExportsFullBatchesAtOnceAndTheRestAfterTheScheduleDelay(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "300")
	exp := &recordingExporter{}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
	p := newProcessor(exp, dropped)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := tp.Tracer("test")
	began := time.Now()
	for range 10 {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
	testwait.Until(t, 5*time.Second, func() bool { b, _ := exp.seen(); return len(b) >= 3 }, "three exports")
	batches, at := exp.seen()
	if len(batches) != 3 || batches[0] != 4 || batches[1] != 4 || batches[2] != 2 {
		t.Fatalf("batches %v; want [4 4 2]: two full ones, then the rest", batches)
	}
	if d := at[1].Sub(began); d > 250*time.Millisecond {
		t.Errorf("the full batches went out %v after the spans ended; want at once, before the 300ms schedule delay", d)
	}
	if d := at[2].Sub(began); d < 250*time.Millisecond || d > 3*time.Second {
		t.Errorf("the rest went out %v after the spans ended; want at the 300ms schedule delay", d)
	}
	if d := testutil.ToFloat64(dropped); d != 0 {
		t.Errorf("%v spans counted dropped; want none", d)
	}
}
