package bus

import (
	"context"
	"sync"
	"time"

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

// clusterAsyncWait bounds how long an asynchronous publish on a cluster
// waits for a place in a pipeline.
const clusterAsyncWait = 5 * time.Second

type pubReq struct {
	channel string
	msg     []byte
	n       int
	err     error
	done    chan struct{}
}

// clusterPublisher is the publisher of a bus on a Redis Cluster: SPUBLISH
// commands (a message crosses only the shard that owns its channel's slot)
// in go-redis pipelines, batched under load.
type clusterPublisher struct {
	client *redis.ClusterClient
	// wg counts the drainers and the asynchronous publishes (the bus's
	// group).
	wg *sync.WaitGroup

	mu       sync.Mutex
	queue    []*pubReq
	flushing int
	closed   bool
}

var _ publisher = (*clusterPublisher)(nil)

var reqPool = sync.Pool{New: func() any { return &pubReq{done: make(chan struct{}, 1)} }}

// publish implements publisher.
func (p *clusterPublisher) publish(ctx context.Context, channel string, msg []byte) (int, error) {
	req := reqPool.Get().(*pubReq)
	req.channel, req.msg, req.n, req.err = channel, msg, 0, nil
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return p.finish(req, ErrClosed)
	}
	p.queue = append(p.queue, req)
	if p.flushing >= maxFlushers {
		p.mu.Unlock()
		select {
		case <-req.done:
			return p.finish(req, nil)
		case <-ctx.Done():
			// The message may still go out with the next pipeline; the
			// request stays with it and is not reused.
			return 0, ctx.Err()
		}
	}
	p.flushing++
	// Ours may have gone out with another flusher's pipeline that is still
	// in flight: the queue is then empty, and we wait for it below.
	for !isDone(req) && len(p.queue) > 0 {
		batch := p.take()
		p.mu.Unlock()
		p.exec(ctx, batch)
		p.mu.Lock()
	}
	if len(p.queue) > 0 {
		// Ours went out: hand the rest to a drainer rather than make our
		// caller wait on other callers' traffic. It keeps our flusher slot.
		// The queue is empty once closed, so the bus's wait group cannot be
		// waited on yet.
		p.wg.Add(1)
		p.mu.Unlock()
		go p.drain()
	} else {
		p.flushing--
		p.mu.Unlock()
	}
	<-req.done
	return p.finish(req, nil)
}

// publishAsync implements publisher: a goroutine of the bus publishes a copy
// of msg.
func (p *clusterPublisher) publishAsync(channel string, msg []byte, done pubDone) {
	msg = append([]byte(nil), msg...)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		done(0, ErrClosed)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), clusterAsyncWait)
		defer cancel()
		done(p.publish(ctx, channel, msg))
	}()
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

// drain flushes until the queue is empty, then gives its slot back. It
// outlives no work: it ends with the queue, each pipeline is bounded by the
// client's read and write timeouts, and close empties the queue.
func (p *clusterPublisher) drain() {
	defer p.wg.Done()
	p.mu.Lock()
	for len(p.queue) > 0 {
		batch := p.take()
		p.mu.Unlock()
		p.exec(context.Background(), batch)
		p.mu.Lock()
	}
	p.flushing--
	p.mu.Unlock()
}

// close implements publisher: the queued publishes fail; pipelines in flight
// finish.
func (p *clusterPublisher) close() {
	p.mu.Lock()
	p.closed = true
	queued := p.queue
	p.queue = nil
	p.mu.Unlock()
	for _, r := range queued {
		r.err = ErrClosed
		r.done <- struct{}{}
	}
}

func isDone(r *pubReq) bool { return len(r.done) > 0 }

// finish returns req's outcome, or err if set, and puts req back.
func (p *clusterPublisher) finish(req *pubReq, err error) (int, error) {
	n := req.n
	if err == nil {
		err = req.err
	}
	req.channel, req.msg = "", nil
	reqPool.Put(req)
	return n, err
}

func (p *clusterPublisher) exec(ctx context.Context, batch []*pubReq) {
	// One context for the batch: a waiter whose own ctx ended still has
	// its message sent, as a direct PUBLISH would have.
	ctx = context.WithoutCancel(ctx)
	pipe := p.client.Pipeline()
	cmds := make([]*redis.IntCmd, len(batch))
	for i, r := range batch {
		cmds[i] = pipe.SPublish(ctx, r.channel, r.msg)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own result and error
	for i, r := range batch {
		n, err := cmds[i].Result()
		r.n, r.err = int(n), err
		r.done <- struct{}{}
	}
}
