package bus_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
)

// A call is what the broker does per tool call across two instances: the
// caller's instance publishes to the workspace channel, the owner's handler
// hands it on, the owner publishes the reply to the caller's inbox and the
// caller's handler receives it: 2 publishes and 2 deliveries.
//
// The baseline is the same exchange with bare go-redis (PUBLISH and a
// PubSub receive loop per side), measured in the same run, so the ratio
// survives a noisy machine.

// BenchmarkRedisCallLatency runs calls one at a time, alternating bus and
// bare Redis, and reports the bus's p50 and its ratio to the bare p50
// (ns/op covers both).
func BenchmarkRedisCallLatency(b *testing.B) {
	srv := redistest.Start(b)
	raw := newRawPair(b, srv.URL())
	bp := newBusPair(b, srv.URL())
	ctx := context.Background()

	for range 200 { // warm up pools and code paths
		raw.call(b, ctx)
		bp.call(b, ctx)
	}
	// Alternate the two so that both see the same machine load.
	rawD := make([]time.Duration, b.N)
	busD := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		raw.call(b, ctx)
		mid := time.Now()
		bp.call(b, ctx)
		rawD[i], busD[i] = mid.Sub(start), time.Since(mid)
	}
	b.StopTimer()
	p50 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	rawP50, busP50 := p50(rawD), p50(busD)
	b.ReportMetric(float64(busP50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(rawP50.Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(busP50)/float64(rawP50), "p50/raw")
}

// BenchmarkRedisCallThroughput runs calls from many goroutines and reports
// calls per second, and the ratio to bare Redis doing the same.
func BenchmarkRedisCallThroughput(b *testing.B) {
	srv := redistest.Start(b)
	raw := newRawPair(b, srv.URL())
	bp := newBusPair(b, srv.URL())
	ctx := context.Background()
	const workers = 64

	run := func(call func()) float64 {
		var wg sync.WaitGroup
		next := make(chan struct{}, b.N)
		for range b.N {
			next <- struct{}{}
		}
		close(next)
		start := time.Now()
		for range workers {
			wg.Go(func() {
				for range next {
					call()
				}
			})
		}
		wg.Wait()
		return float64(b.N) / time.Since(start).Seconds()
	}
	rawRate := run(func() { raw.call(b, ctx) })
	b.ResetTimer()
	busRate := run(func() { bp.call(b, ctx) })
	b.StopTimer()
	b.ReportMetric(busRate, "calls/s")
	b.ReportMetric(rawRate, "raw-calls/s")
	b.ReportMetric(busRate/rawRate, "rate/raw")
}

// replies routes a reply to the goroutine waiting for it, by a numeric id
// in the payload.
type replies struct {
	mu      sync.Mutex
	seq     uint64
	waiting map[uint64]chan struct{}
}

func (r *replies) register() (uint64, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	ch := make(chan struct{}, 1)
	r.waiting[r.seq] = ch
	return r.seq, ch
}

func (r *replies) deliver(id uint64) {
	r.mu.Lock()
	ch := r.waiting[id]
	delete(r.waiting, id)
	r.mu.Unlock()
	if ch != nil {
		ch <- struct{}{}
	}
}

func encodeID(id uint64) []byte {
	b := make([]byte, 8)
	for i := range 8 {
		b[i] = byte(id >> (8 * i))
	}
	return b
}

func decodeID(b []byte) uint64 {
	var id uint64
	for i := range min(8, len(b)) {
		id |= uint64(b[i]) << (8 * i)
	}
	return id
}

type busPair struct {
	caller  *bus.Redis
	replies *replies
}

func newBusPair(b *testing.B, url string) *busPair {
	b.Helper()
	prefix := "bench:" + time.Now().Format("150405.000000") + ":"
	open := func() *bus.Redis {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := bus.NewRedis(ctx, bus.RedisConfig{URL: url, Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = r.Close() })
		return r
	}
	caller, owner := open(), open()
	p := &busPair{caller: caller, replies: &replies{waiting: map[uint64]chan struct{}{}}}
	ctx := context.Background()
	// The owner hands calls to a responder, as the broker hands them to a
	// socket writer: handlers must not block on a publish.
	calls := make(chan []byte, 1024)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case m := <-calls:
					if _, err := owner.Publish(ctx, "inbox:caller", m); err != nil {
						b.Error(err)
					}
				case <-done:
					return
				}
			}
		})
	}
	b.Cleanup(func() { close(done); wg.Wait() })
	if _, err := owner.Subscribe(ctx, "ws:1", func(m []byte) { calls <- m }); err != nil {
		b.Fatal(err)
	}
	if _, err := caller.Subscribe(ctx, "inbox:caller", func(m []byte) { p.replies.deliver(decodeID(m)) }); err != nil {
		b.Fatal(err)
	}
	return p
}

func (p *busPair) call(b *testing.B, ctx context.Context) {
	id, ch := p.replies.register()
	if n, err := p.caller.Publish(ctx, "ws:1", encodeID(id)); err != nil || n != 1 {
		b.Fatalf("Publish = %d, %v", n, err)
	}
	<-ch
}

type rawPair struct {
	caller  *redis.Client
	prefix  string
	replies *replies
}

func newRawPair(b *testing.B, url string) *rawPair {
	b.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	caller, owner := redis.NewClient(opts), redis.NewClient(opts)
	prefix := "raw:" + time.Now().Format("150405.000000") + ":"
	p := &rawPair{caller: caller, prefix: prefix, replies: &replies{waiting: map[uint64]chan struct{}{}}}
	ctx := context.Background()
	ownerSub := owner.Subscribe(ctx, prefix+"ws:1")
	callerSub := caller.Subscribe(ctx, prefix+"inbox:caller")
	for _, s := range []*redis.PubSub{ownerSub, callerSub} {
		if _, err := s.Receive(ctx); err != nil { // the subscription confirmation
			b.Fatal(err)
		}
	}
	calls := make(chan string, 1024)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(calls)
		for {
			m, err := ownerSub.ReceiveMessage(ctx)
			if err != nil {
				return
			}
			calls <- m.Payload
		}
	})
	for range 8 {
		wg.Go(func() {
			for m := range calls {
				owner.Publish(ctx, prefix+"inbox:caller", m)
			}
		})
	}
	wg.Go(func() {
		for {
			m, err := callerSub.ReceiveMessage(ctx)
			if err != nil {
				return
			}
			p.replies.deliver(decodeID([]byte(m.Payload)))
		}
	})
	b.Cleanup(func() {
		_ = ownerSub.Close()
		_ = callerSub.Close()
		wg.Wait()
		_ = caller.Close()
		_ = owner.Close()
	})
	return p
}

func (p *rawPair) call(b *testing.B, ctx context.Context) {
	id, ch := p.replies.register()
	if n, err := p.caller.Publish(ctx, p.prefix+"ws:1", encodeID(id)).Result(); err != nil || n != 1 {
		b.Fatalf("raw Publish = %d, %v", n, err)
	}
	<-ch
}
