// Package handoff lets a loop goroutine run each step's work itself and move
// the loop to a new goroutine only when a step blocks.
//
// A read loop that hands every message to another goroutine pays a wake-up
// per message (about 10 µs of latency on a lightly loaded machine, and the
// CPU of the scheduler's spinning); one that runs the work inline stalls every
// later message behind a step that blocks. A Loop gets both: steps run
// inline, and a step still running after a short delay has the loop restart
// on a new goroutine while the old one finishes the step and exits. This is
// how the Go runtime treats a goroutine stuck in a system call.
package handoff

import (
	"runtime"
	"sync/atomic"
	"time"
)

// DefaultAfter is how long a step may run before the loop moves on without
// it: long enough for a handler that only computes a little and writes to a
// socket with room, short enough that steps which wait (on a disk, a child
// process, a lock) still overlap almost as if each had its own goroutine.
const DefaultAfter = 200 * time.Microsecond

// Loop hands a loop over to a new goroutine when a step blocks. It is used
// by one loop goroutine at a time (the current owner of the loop).
type Loop struct {
	after time.Duration
	start func()
}

// New returns a Loop. start must start the loop body on a new goroutine
// (registering that goroutine with whoever waits for the loop) and return;
// it is called from a timer's goroutine while the step that blocked still
// runs, so a WaitGroup counting the loop goroutines is above zero then.
func New(after time.Duration, start func()) *Loop {
	if after <= 0 {
		after = DefaultAfter
	}
	return &Loop{after: after, start: start}
}

type step struct {
	l      *Loop
	handed atomic.Bool
}

func (s *step) handOff() {
	s.l.start()
	s.handed.Store(true)
}

// Do runs fn on the calling goroutine. It reports whether the caller still
// owns the loop: false means fn ran past the delay, a new goroutine has
// taken over the loop, and the caller must return without touching the
// loop's state. When Do returns false that goroutine has been started.
func (l *Loop) Do(fn func()) bool {
	s := &step{l: l}
	t := time.AfterFunc(l.after, s.handOff)
	fn()
	if t.Stop() {
		return true
	}
	// The timer fired: wait until its function has started the new owner
	// (it is at most a goroutine start away).
	for !s.handed.Load() {
		runtime.Gosched()
	}
	return false
}
