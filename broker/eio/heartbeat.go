package eio

import (
	"sync"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// The Engine.IO v4 heartbeat: the server pings every pingInterval and closes
// a connection whose pong does not come within pingTimeout. One goroutine
// keeps the beat of every connection: each connection's next step (its ping,
// or the deadline of its pong) waits in one of two queues, and since every
// connection waits the same interval for the same step, each queue is in
// due order by construction: no timer per connection, and steps due within
// hbSlack of each other run in one wake-up.

// hbSlack is how much later than due a step may run, so that the steps of
// many connections share wake-ups.
const hbSlack = 20 * time.Millisecond

// heartbeats is the broker's heartbeat scheduler.
//
// Concurrency: schedule may be called from any goroutine (under the
// session's mu: the lock order is Session.mu, then heartbeats.mu); run is
// its goroutine, which stop ends and waits for.
type heartbeats struct {
	interval, timeout time.Duration
	start             time.Time // due times are offsets from it (monotonic)

	mu    sync.Mutex
	pings hbQueue // next ping of each connection, due after interval
	pongs hbQueue // pong deadlines, due after timeout
	wake  chan struct{}

	stopOnce sync.Once
	stopped  chan struct{}
	done     chan struct{}
}

// hbStep is a connection's next heartbeat step; it is stale once the
// connection's hbSeq moved on.
type hbStep struct {
	s   *Session
	due time.Duration
	seq uint32
}

// hbQueue is a FIFO of steps in due order.
type hbQueue struct {
	steps []hbStep
	head  int
}

func (q *hbQueue) push(s hbStep) { q.steps = append(q.steps, s) }

func (q *hbQueue) peek() (hbStep, bool) {
	if q.head == len(q.steps) {
		return hbStep{}, false
	}
	return q.steps[q.head], true
}

func (q *hbQueue) pop() hbStep {
	s := q.steps[q.head]
	q.steps[q.head] = hbStep{}
	q.head++
	if q.head == len(q.steps) {
		q.steps, q.head = q.steps[:0], 0
	} else if q.head > 1024 && q.head > len(q.steps)/2 {
		n := copy(q.steps, q.steps[q.head:])
		// The slots past the moved steps still hold copies of them, and
		// with them their connections: cleared, or every connection a
		// compaction moved stays reachable after it closed.
		clear(q.steps[n:])
		q.steps, q.head = q.steps[:n], 0
	}
	return s
}

func newHeartbeats(interval, timeout time.Duration) *heartbeats {
	h := &heartbeats{
		interval: interval,
		timeout:  timeout,
		start:    time.Now(),
		wake:     make(chan struct{}, 1),
		stopped:  make(chan struct{}),
		done:     make(chan struct{}),
	}
	go h.run() // ended by stop
	return h
}

// now is the scheduler's clock.
func (h *heartbeats) now() time.Duration { return time.Since(h.start) }

// schedule queues s's next step: a ping (pong false) after interval, or the
// deadline of the ping just sent after timeout. s.mu is held.
func (h *heartbeats) schedule(s *Session, pong bool) {
	s.hbSeq++
	h.mu.Lock()
	q, wait := &h.pings, h.interval
	if pong {
		q, wait = &h.pongs, h.timeout
	}
	_, busy := q.peek()
	q.push(hbStep{s: s, due: h.now() + wait, seq: s.hbSeq})
	h.mu.Unlock()
	if !busy {
		// The queue was empty: the scheduler may be waiting for nothing.
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

func (h *heartbeats) run() {
	defer close(h.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var pings, pongs []hbStep
	for {
		h.mu.Lock()
		now := h.now()
		pings, pongs = due(&h.pings, now, pings[:0]), due(&h.pongs, now, pongs[:0])
		next := time.Duration(-1)
		for _, q := range []*hbQueue{&h.pings, &h.pongs} {
			if s, ok := q.peek(); ok && (next < 0 || s.due < next) {
				next = s.due
			}
		}
		h.mu.Unlock()
		for i, s := range pings {
			s.s.ping(s.seq)
			pings[i] = hbStep{}
		}
		for i, s := range pongs {
			s.s.pongLate(s.seq)
			pongs[i] = hbStep{}
		}
		wait := time.Hour
		if next >= 0 {
			wait = max(next-now, 0) + hbSlack
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-h.wake:
		case <-h.stopped:
			return
		}
	}
}

// due moves the steps due by now (with the slack) from q to out.
func due(q *hbQueue, now time.Duration, out []hbStep) []hbStep {
	for {
		s, ok := q.peek()
		if !ok || s.due > now+hbSlack {
			return out
		}
		out = append(out, q.pop())
	}
}

// stop ends the scheduler; steps still queued never run.
func (h *heartbeats) stop() {
	h.stopOnce.Do(func() { close(h.stopped) })
	<-h.done
}

// startHeartbeat arms s's first ping, pingInterval from now.
func (s *Session) startHeartbeat() {
	s.mu.Lock()
	if !s.closed {
		s.srv.beats.schedule(s, false)
	}
	s.mu.Unlock()
}

// ping is s's ping step: send a ping and wait for its pong.
func (s *Session) ping(seq uint32) {
	s.mu.Lock()
	if s.closed || seq != s.hbSeq {
		s.mu.Unlock()
		return
	}
	s.awaitingPong = true
	s.srv.beats.schedule(s, true)
	s.mu.Unlock()
	_ = s.Send([]byte{byte(protocol.EIOPing)})
}

// pongLate is s's pong deadline: no pong since the ping, so s is closed.
func (s *Session) pongLate(seq uint32) {
	s.mu.Lock()
	late := !s.closed && seq == s.hbSeq && s.awaitingPong
	if late {
		// Counted while s is open, so the server's count is above zero.
		s.srv.wg.Add(1)
	}
	s.mu.Unlock()
	if late {
		s.Log(s.srv.log.Info()).Msg("no pong within ping timeout")
		// Closing may wait for the bus (unsubscribing): not on the
		// scheduler's goroutine.
		go func() {
			defer s.srv.wg.Done()
			s.Close(ReasonPingTimeout, true)
		}()
	}
}

func (s *Session) pong() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.awaitingPong {
		return
	}
	s.awaitingPong = false
	s.srv.beats.schedule(s, false)
}
