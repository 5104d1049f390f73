package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher runs the store's scripts, many in one round trip when they come
// at once. A script run alone is sent at once on the calling goroutine, as
// Script.Run would: no handoff, no wait. Scripts that come while a batch is
// in flight queue; when the batch is back, the first of them leads the next
// batch, which takes the whole queue as one pipeline. So each caller sends
// at most the one batch that holds its own script, and under load one
// write and one read carry tens of scripts, for the broker and for Redis.
//
// Hand-written on go-redis's Pipeline rather than its AutoPipeline
// (experimental in v9.23): that one hands every command to a flusher
// goroutine, which cost a call answered one at a time 10% more latency and
// broker CPU here, and it does not honour a command's context once the
// command is queued. Measured on 2 cores, async submit + wait on Redis at
// c=64 (see the commit that added this file).
//
// The scripts of one batch are independent: each is its own atomic step,
// and a caller's steps follow one another (the next is sent after the
// previous one's reply), so the order within a batch does not matter.
// A batch is never retried (the client's MaxRetries is -1): a script whose
// reply was lost may have run. A script Redis does not know (NOSCRIPT,
// after a restart) did not run, and is run again with its source.
//
// Concurrency: run may be called from any goroutine.
type batcher struct {
	client redis.UniversalClient

	mu      sync.Mutex
	running bool          // a batch is in flight
	queue   []*scriptCall // waiting for the next batch
}

// scriptCall is one script to run and, once done is closed, its result.
type scriptCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	// done is closed when cmd is set; lead is sent instead when this
	// call's goroutine is to send the next batch, which holds it.
	done chan struct{}
	lead chan struct{}
	// taken is set, under the batcher's lock, once a batch holds the call:
	// from then on its caller waits for it, whatever its context says.
	taken bool
}

// maxBatch bounds the scripts of one batch; more wait for the next.
const maxBatch = 128

// run runs script with keys and args, alone or in a batch, and returns its
// result. A context that ends while the script waits for a batch takes it
// out of the queue: the script never runs.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	b.mu.Lock()
	if !b.running {
		b.running = true
		b.mu.Unlock()
		defer b.next() // also if the script panics: the queue never waits for a leader gone
		return script.Run(ctx, b.client, keys, args...)
	}
	sc := &scriptCall{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	b.queue = append(b.queue, sc)
	b.mu.Unlock()
	select {
	case <-sc.done:
		return sc.cmd
	case <-sc.lead:
		return b.lead(sc)
	case <-ctx.Done():
	}
	if b.drop(sc) {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(ctx.Err())
		return cmd
	}
	select { // in a batch, or about to lead one
	case <-sc.done:
		return sc.cmd
	case <-sc.lead:
		return b.lead(sc)
	}
}

// lead sends the batch that holds sc, whose goroutine was told to lead it,
// and returns sc's result.
func (b *batcher) lead(sc *scriptCall) *redis.Cmd {
	b.send()
	<-sc.done // its own batch, just sent
	return sc.cmd
}

// drop takes sc out of the queue unless a batch holds it already.
func (b *batcher) drop(sc *scriptCall) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sc.taken {
		return false
	}
	if i := slices.Index(b.queue, sc); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	return true
}

// next ends a batch: the first call queued meanwhile leads the next one,
// or nothing is in flight any more.
func (b *batcher) next() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.running = false
		return
	}
	b.queue[0].taken = true
	b.queue[0].lead <- struct{}{}
}

// send takes the queue (the leader first) and sends it as one batch. Its
// scripts are answered, and the next leader told, even if exec panics.
func (b *batcher) send() {
	b.mu.Lock()
	n := min(len(b.queue), maxBatch)
	batch := slices.Clone(b.queue[:n])
	b.queue = slices.Clone(b.queue[n:])
	for _, sc := range batch {
		sc.taken = true
	}
	b.mu.Unlock()
	defer func() {
		p := recover()
		b.next()
		for _, sc := range batch {
			if p != nil {
				sc.cmd = redis.NewCmd(sc.ctx)
				sc.cmd.SetErr(errBatchFailed)
			}
			close(sc.done)
		}
		if p != nil {
			panic(p)
		}
	}()
	b.exec(batch)
}

// errBatchFailed answers the scripts of a batch whose sending panicked.
var errBatchFailed = errors.New("redis call store: the batch holding this script failed")

// exec runs a batch: one script as Script.Run does, several pipelined.
func (b *batcher) exec(batch []*scriptCall) {
	if len(batch) == 1 {
		sc := batch[0]
		sc.cmd = sc.script.Run(sc.ctx, b.client, sc.keys, sc.args...)
		return
	}
	// The batch is bounded by the earliest of its scripts' deadlines, so
	// that none waits past its own, and not cut short by a caller going.
	ctx, cancel := batchContext(batch)
	defer cancel()
	pipe := b.client.Pipeline()
	for _, sc := range batch {
		sc.cmd = sc.script.EvalSha(ctx, pipe, sc.keys, sc.args...)
	}
	_, _ = pipe.Exec(ctx) // each script's error is in its cmd
	for _, sc := range batch {
		if redis.HasErrorPrefix(sc.cmd.Err(), "NOSCRIPT") {
			sc.cmd = sc.script.Run(ctx, b.client, sc.keys, sc.args...)
		}
	}
}

// batchContext is a context ending at the earliest deadline of the
// batch's scripts (defaultBatchTimeout from now for one without).
func batchContext(batch []*scriptCall) (context.Context, context.CancelFunc) {
	earliest := time.Now().Add(defaultBatchTimeout)
	for _, sc := range batch {
		if d, ok := sc.ctx.Deadline(); ok && d.Before(earliest) {
			earliest = d
		}
	}
	return context.WithDeadline(context.Background(), earliest)
}

// defaultBatchTimeout bounds a batch of scripts without deadlines.
const defaultBatchTimeout = 5 * time.Second
