package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/internal/testwait"
)

// countingHook counts the pipelines a client sends and the commands in
// them, and the commands it sends alone.
type countingHook struct {
	pipelines, pipelined, alone atomic.Int64
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.alone.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		h.pipelined.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func newBatcher(t *testing.T) (*batcher, *redis.Client, *countingHook) {
	t.Helper()
	srv := redistest.Start(t)
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries, opts.ContextTimeoutEnabled, opts.Protocol = -1, true, 2
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	// Connected first: the connection's own setup is a pipeline too.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	hook := &countingHook{}
	client.AddHook(hook)
	return &batcher{client: client}, client, hook
}

// echoScript appends ARGV[2] to the list KEYS[1] and returns ARGV[1].
var echoScript = redis.NewScript(`redis.call('RPUSH', KEYS[1], ARGV[2]) return ARGV[1]`)

// slowScript keeps Redis busy for ARGV[1] milliseconds.
var slowScript = redis.NewScript(`
local t = redis.call('TIME')
local start = t[1] * 1000 + math.floor(t[2] / 1000)
repeat
  t = redis.call('TIME')
until t[1] * 1000 + math.floor(t[2] / 1000) - start >= tonumber(ARGV[1])
return 1
`)

func TestBatcherRunsConcurrentScriptsInFewRoundTripsEachOnce(t *testing.T) {
	b, client, hook := newBatcher(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Some scripts come while Redis does not know them (a restart).
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const workers, each = 32, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				want := fmt.Sprintf("%d-%d", w, i)
				got, err := b.run(ctx, echoScript, []string{"ran:" + strconv.Itoa(w)}, want, i).Text()
				if err != nil || got != want {
					errs <- fmt.Errorf("script %s answered %q, %v", want, got, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Each script ran once, and each worker's in order.
	for w := range workers {
		ran, err := client.LRange(ctx, "ran:"+strconv.Itoa(w), 0, -1).Result()
		if err != nil || len(ran) != each {
			t.Fatalf("worker %d: scripts ran %d times (%v), want %d", w, len(ran), err, each)
		}
		for i, v := range ran {
			if v != strconv.Itoa(i) {
				t.Fatalf("worker %d: runs %v, want 0..%d in order", w, ran, each-1)
			}
		}
	}
	total := int64(workers * each)
	if hook.pipelines.Load() == 0 || hook.pipelined.Load() < total/4 {
		t.Fatalf("%d scripts: %d pipelines carried %d, %d sent alone; want most of them batched",
			total, hook.pipelines.Load(), hook.pipelined.Load(), hook.alone.Load())
	}
	t.Logf("%d scripts: %d pipelines carried %d (%.1f each), %d commands sent alone",
		total, hook.pipelines.Load(), hook.pipelined.Load(), float64(hook.pipelined.Load())/float64(hook.pipelines.Load()), hook.alone.Load())
}

func TestBatcherRunsAScriptAloneAtOnce(t *testing.T) {
	b, _, hook := newBatcher(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		if got, err := b.run(ctx, echoScript, []string{"alone"}, "x", i).Text(); err != nil || got != "x" {
			t.Fatalf("run %d = %q, %v", i, got, err)
		}
	}
	if hook.pipelines.Load() != 0 {
		t.Fatalf("%d pipelines for scripts run one at a time, want none", hook.pipelines.Load())
	}
}

func TestBatcherDropsAQueuedScriptWhoseContextEnds(t *testing.T) {
	b, client, _ := newBatcher(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	busy := make(chan error, 1)
	go func() { busy <- b.run(ctx, slowScript, []string{"slow"}, 300).Err() }()
	// Queued behind the slow script: its context ends while it waits.
	testwait.Until(t, 5*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.running
	}, "the slow script to start")
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	start := time.Now()
	err := b.run(short, echoScript, []string{"dropped"}, "x", 1).Err()
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("queued script whose context ended: %v after %s, want its context's error at once", err, time.Since(start))
	}
	if err := <-busy; err != nil {
		t.Fatalf("slow script: %v", err)
	}
	// The next script runs; the dropped one never did.
	if got, err := b.run(ctx, echoScript, []string{"after"}, "y", 1).Text(); err != nil || got != "y" {
		t.Fatalf("script after = %q, %v", got, err)
	}
	if n, err := client.Exists(ctx, "dropped").Result(); err != nil || n != 0 {
		t.Fatalf("the dropped script ran (%d, %v)", n, err)
	}
}
