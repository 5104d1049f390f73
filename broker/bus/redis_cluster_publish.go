package bus

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Publishing is a group commit: a publisher that finds fewer than
// maxFlushers pipelines in flight sends the queue itself (at low load just
// its own message, with no handoff); the others wait and go out together in
// the next pipeline. Under load many messages share one round trip and one
// write, which is what lets two brokers relay through one Redis at a rate
// close to a single broker's.
const (
	maxFlushers = 4
	maxBatch    = 256
)

// pubReq is one queued publish: a synchronous one is told through done, an
// asynchronous one has its pubDone called.
type pubReq struct {
	channel string
	msg     []byte
	n       int
	err     error
	done    chan struct{}
	async   pubDone
}

// clusterPublisher is the publisher of a bus on a Redis Cluster: SPUBLISH
// commands (a message crosses only the shard that owns its channel's slot)
// in go-redis pipelines, batched under load. On a single server with the
// pipe off (TETHER_TUNING=no-redispipe) it is the plain way the pipe is
// measured against: PUBLISH commands through go-redis's own client.
//
// Every publish joins one queue, in call order. A synchronous one is sent
// by its own goroutine (the group commit above) unless the queue holds or
// has in flight an asynchronous one; asynchronous publishes, and whatever
// queues behind them, are sent by the drainer, a single goroutine of the
// bus that runs while the queue is not empty and sends one pipeline at a
// time. So no publish overtakes an asynchronous one made before it by the
// same goroutine (go-redis sends concurrent pipelines on different
// connections, which Redis may serve in any order), and a synchronous one
// cannot be overtaken anyway: its goroutine waits for it.
type clusterPublisher struct {
	client  redis.UniversalClient
	command string          // "spublish" on a cluster, "publish" on a single server
	prefix  string          // of every channel
	wg      *sync.WaitGroup // the bus's: counts the drainer

	mu       sync.Mutex
	queue    []*pubReq
	flushing int  // synchronous publishers sending a pipeline, at most maxFlushers
	async    int  // asynchronous publishes queued or in the drainer's pipeline
	draining bool // the drainer runs; always so while async > 0
	closed   bool
}

var _ publisher = (*clusterPublisher)(nil)

var reqPool = sync.Pool{New: func() any { return &pubReq{done: make(chan struct{}, 1)} }}

// publish implements publisher.
func (p *clusterPublisher) publish(ctx context.Context, channel string, msg []byte) (int, error) {
	req := reqPool.Get().(*pubReq)
	req.channel, req.msg, req.n, req.err = p.prefix+channel, msg, 0, nil
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return p.finish(req, ErrClosed)
	}
	p.queue = append(p.queue, req)
	if p.flushing < maxFlushers && p.async == 0 {
		p.flushing++
		// Ours may have gone out with another flusher's pipeline that is
		// still in flight (the queue is then empty), or an asynchronous
		// publish queued since: the drainer sends the rest.
		for !isDone(req) && len(p.queue) > 0 && p.async == 0 {
			batch := p.take()
			p.mu.Unlock()
			p.exec(ctx, batch)
			p.mu.Lock()
		}
		p.flushing--
		if len(p.queue) > 0 {
			// Rather than make our caller wait on other callers'
			// traffic.
			p.startDrainLocked()
		}
	}
	p.mu.Unlock()
	if isDone(req) { // sent by us: the outcome, even if ctx ended meanwhile
		<-req.done
		return p.finish(req, nil)
	}
	select {
	case <-req.done:
		return p.finish(req, nil)
	case <-ctx.Done():
		// The message may still go out with the next pipeline; the
		// request stays with it and is not reused.
		return 0, ctx.Err()
	}
}

// publishAsync implements publisher: a copy of msg joins the queue for the
// drainer.
func (p *clusterPublisher) publishAsync(channel string, msg []byte, done pubDone) {
	req := reqPool.Get().(*pubReq)
	req.channel, req.msg, req.async = p.prefix+channel, append([]byte(nil), msg...), done
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.finish(req, nil)
		done(0, ErrClosed)
		return
	}
	p.queue = append(p.queue, req)
	p.async++
	p.startDrainLocked()
	p.mu.Unlock()
}

// startDrainLocked starts the drainer unless it runs; p.mu is held. The
// queue is empty once closed, so nothing starts it after the bus began to
// wait for its goroutines.
func (p *clusterPublisher) startDrainLocked() {
	if p.draining {
		return
	}
	p.draining = true
	p.wg.Add(1)
	go p.drain()
}

// take removes the next batch from the queue; p.mu is held.
func (p *clusterPublisher) take() []*pubReq {
	batch := p.queue
	if len(batch) > maxBatch {
		batch = batch[:maxBatch]
	}
	p.queue = p.queue[len(batch):]
	return batch
}

// drain sends the queue, one pipeline at a time, until it is empty. It
// outlives no work: it ends with the queue, each pipeline is bounded by the
// client's read and write timeouts, and close empties the queue.
func (p *clusterPublisher) drain() {
	defer p.wg.Done()
	p.mu.Lock()
	for len(p.queue) > 0 {
		batch := p.take()
		p.mu.Unlock()
		async := p.exec(context.Background(), batch)
		p.mu.Lock()
		p.async -= async
	}
	p.draining = false
	p.mu.Unlock()
}

// close implements publisher: the queued publishes fail; pipelines in flight
// finish.
func (p *clusterPublisher) close() {
	p.mu.Lock()
	p.closed = true
	queued := p.queue
	p.queue = nil
	for _, r := range queued {
		if r.async != nil {
			p.async--
		}
	}
	p.mu.Unlock()
	for _, r := range queued {
		p.answer(r, 0, ErrClosed)
	}
}

func isDone(r *pubReq) bool { return len(r.done) > 0 }

// answer hands r its outcome. An asynchronous request is done with then; a
// synchronous one is put back by its waiter (finish).
func (p *clusterPublisher) answer(r *pubReq, n int, err error) {
	if done := r.async; done != nil {
		p.finish(r, nil)
		done(n, err)
		return
	}
	r.n, r.err = n, err
	r.done <- struct{}{}
}

// finish returns req's outcome, or err if set, and puts req back.
func (p *clusterPublisher) finish(req *pubReq, err error) (int, error) {
	n := req.n
	if err == nil {
		err = req.err
	}
	req.channel, req.msg, req.async = "", nil, nil
	reqPool.Put(req)
	return n, err
}

// exec sends batch in one pipeline, answers each request and returns how
// many were asynchronous.
func (p *clusterPublisher) exec(ctx context.Context, batch []*pubReq) (async int) {
	// One context for the batch: a waiter whose own ctx ended still has
	// its message sent, as a direct PUBLISH would have.
	ctx = context.WithoutCancel(ctx)
	pipe := p.client.Pipeline()
	cmds := make([]*redis.IntCmd, len(batch))
	for i, r := range batch {
		cmds[i] = redis.NewIntCmd(ctx, p.command, r.channel, r.msg)
		_ = pipe.Process(ctx, spublish{cmds[i]})
	}
	_, _ = pipe.Exec(ctx) // each command carries its own result and error
	for i, r := range batch {
		if r.async != nil {
			async++
		}
		n, err := cmds[i].Result()
		p.answer(r, int(n), err)
	}
	return async
}

// spublish is an SPUBLISH (or PUBLISH) that go-redis does not resend once it may have
// run (the retry rule of publisher): NoRetry stops the resend after a
// broken connection or a read timeout. A redirection (MOVED, ASK), and a
// connection that could not be had, are still followed: Redis did not run
// the command.
type spublish struct{ *redis.IntCmd }

func (spublish) NoRetry() bool { return true }
