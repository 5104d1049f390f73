package tracing

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
