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

type pubReq struct {
	channel string
	msg     []byte
	n       int64
	err     error
	done    chan struct{}
}

// publisher batches PUBLISH (or SPUBLISH) commands for one Redis bus.
type publisher struct {
	pipe func() redis.Pipeliner
	// sharded: SPUBLISH for Redis Cluster (a call crosses one shard).
	sharded bool

	mu       sync.Mutex
	queue    []*pubReq
	flushing int
}

var reqPool = sync.Pool{New: func() any { return &pubReq{done: make(chan struct{}, 1)} }}

func (p *publisher) publish(ctx context.Context, channel string, msg []byte) (int64, error) {
	req := reqPool.Get().(*pubReq)
	req.channel, req.msg, req.n, req.err = channel, msg, 0, nil
	p.mu.Lock()
	p.queue = append(p.queue, req)
	if p.flushing >= maxFlushers {
		p.mu.Unlock()
		select {
		case <-req.done:
			return p.finish(req)
		case <-ctx.Done():
			// The message may still go out with the next pipeline; the
			// request stays with it and is not reused.
			return 0, ctx.Err()
		}
	}
	p.flushing++
	for !isDone(req) {
		batch := p.take()
		p.mu.Unlock()
		p.exec(ctx, batch)
		p.mu.Lock()
	}
	if len(p.queue) > 0 {
		// Ours went out: hand the rest to a drainer rather than make our
		// caller wait on other callers' traffic. It keeps our flusher slot.
		p.mu.Unlock()
		go p.drain()
	} else {
		p.flushing--
		p.mu.Unlock()
	}
	<-req.done
	return p.finish(req)
}

// take removes the next batch from the queue; p.mu is held.
func (p *publisher) take() []*pubReq {
	batch := p.queue
	if len(batch) > maxBatch {
		batch = batch[:maxBatch]
	}
	p.queue = p.queue[len(batch):]
	return batch
}

// drain flushes until the queue is empty, then gives its slot back. It
// outlives no work: it ends with the queue, each pipeline is bounded by the
// client's read and write timeouts, and a closed bus refuses publishes
// before they reach the queue.
func (p *publisher) drain() {
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

func isDone(r *pubReq) bool { return len(r.done) > 0 }

func (p *publisher) finish(req *pubReq) (int64, error) {
	n, err := req.n, req.err
	req.channel, req.msg = "", nil
	reqPool.Put(req)
	return n, err
}

func (p *publisher) exec(ctx context.Context, batch []*pubReq) {
	// One context for the batch: a waiter whose own ctx ended still has
	// its message sent, as a direct PUBLISH would have.
	ctx = context.WithoutCancel(ctx)
	pipe := p.pipe()
	cmds := make([]*redis.IntCmd, len(batch))
	for i, r := range batch {
		if p.sharded {
			cmds[i] = pipe.SPublish(ctx, r.channel, r.msg)
		} else {
			cmds[i] = pipe.Publish(ctx, r.channel, r.msg)
		}
	}
	_, _ = pipe.Exec(ctx) // each command carries its own result and error
	for i, r := range batch {
		r.n, r.err = cmds[i].Result()
		r.done <- struct{}{}
	}
}
