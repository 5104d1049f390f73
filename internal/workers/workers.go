// Package workers runs functions on goroutines it keeps between them.
//
// A goroutine started for one request begins on a small stack and grows it
// to what the request's code needs (the broker's async submit goes through
// go-redis: several copies up to 32 KB), then frees it when it ends; the
// next request does it all again. Profiles of the broker answering async
// submits one at a time showed a sixth of its CPU in stack growth and
// goroutine exit. A kept worker has its stack grown already. What it
// earns on synchronous calls that cross the bus (the call server waits for
// them on a worker), against a goroutine per function
// (TETHER_TUNING=no-workers; make bench-peers, 2026-12-04, two instances,
// medians of five rounds' ratios): without it the brokers made 0.93x
// (c=1) and 0.96x (c=64) the calls per CPU-second; p99 within the
// rounds' spread.
package workers

import (
	"sync"
	"time"

	"github.com/tetherdev/tether/internal/tuning"
)

// Pool hands functions to its idle workers, or to a new worker when none
// is idle. A worker idle for IdleTimeout ends. Close ends the idle workers
// and makes the busy ones end after their function; Wait waits for them.
//
// Concurrency: all methods may be called from any goroutine.
type Pool struct {
	// IdleTimeout ends a worker that waited that long for work; 10 s when
	// zero.
	IdleTimeout time.Duration

	work   chan func()
	once   sync.Once
	closed chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	ended  bool
}

func (p *Pool) init() {
	p.once.Do(func() {
		p.work = make(chan func())
		p.closed = make(chan struct{})
		if p.IdleTimeout <= 0 {
			p.IdleTimeout = 10 * time.Second
		}
	})
}

// Go runs f on a worker. It never waits for one to be free. After Close,
// or with the piece off (TETHER_TUNING=no-workers), it runs f on a
// goroutine of its own, still counted by Wait.
func (p *Pool) Go(f func()) {
	p.init()
	if on {
		select {
		case p.work <- f:
			return
		default:
		}
	}
	p.mu.Lock()
	p.wg.Add(1)
	ended := p.ended || !on
	p.mu.Unlock()
	go p.worker(f, ended)
}

// on is whether workers are kept (tuning.Workers).
var on = tuning.On(tuning.Workers)

// worker runs f, then the functions handed to it, until it waits for
// work longer than IdleTimeout or the pool closes.
func (p *Pool) worker(f func(), once bool) {
	defer p.wg.Done()
	f()
	if once {
		return
	}
	idle := time.NewTimer(p.IdleTimeout)
	defer idle.Stop()
	for {
		select {
		case f := <-p.work:
			f()
			idle.Reset(p.IdleTimeout)
		case <-idle.C:
			return
		case <-p.closed:
			return
		}
	}
}

// Close ends the idle workers; busy ones end after their function.
func (p *Pool) Close() {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ended {
		p.ended = true
		close(p.closed)
	}
}

// Wait waits until every worker has ended (after Close).
func (p *Pool) Wait() { p.wg.Wait() }
