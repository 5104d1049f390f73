package handoff_test

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherdev/tether/internal/handoff"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loop is a test loop: it takes steps from a channel and runs them through
// a handoff.Loop, counting the goroutines that owned the loop.
type loop struct {
	steps chan func()
	wg    sync.WaitGroup
	l     *handoff.Loop

	mu   sync.Mutex
	gens int // goroutines that owned the loop
}

func newLoop(after time.Duration) *loop {
	lp := &loop{steps: make(chan func())}
	lp.l = handoff.New(after, func() {
		lp.wg.Add(1)
		go lp.run()
	})
	lp.wg.Add(1)
	go lp.run()
	return lp
}

func (lp *loop) run() {
	defer lp.wg.Done()
	lp.mu.Lock()
	lp.gens++
	lp.mu.Unlock()
	for fn := range lp.steps {
		if !lp.l.Do(fn) {
			return
		}
	}
}

func (lp *loop) stop() {
	close(lp.steps)
	lp.wg.Wait()
}

func (lp *loop) generations() int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return lp.gens
}

// TestQuickStepsStayOnOneGoroutine: steps that finish in time never move the
// loop.
func TestQuickStepsStayOnOneGoroutine(t *testing.T) {
	lp := newLoop(time.Second)
	done := make(chan int, 100)
	for i := range 100 {
		lp.steps <- func() { done <- i }
	}
	for i := range 100 {
		if got := <-done; got != i {
			t.Fatalf("step %d ran as %d", i, got)
		}
	}
	lp.stop()
	if g := lp.generations(); g != 1 {
		t.Fatalf("%d goroutines owned the loop; want 1", g)
	}
}

// TestBlockedStepHandsTheLoopOver: while one step blocks, later steps run
// on a new goroutine within about the delay; the blocked step finishes
// afterwards and its goroutine leaves the loop.
func TestBlockedStepHandsTheLoopOver(t *testing.T) {
	const after = 20 * time.Millisecond
	lp := newLoop(after)
	release := make(chan struct{})
	blocked := make(chan struct{})
	lp.steps <- func() { close(blocked); <-release }
	<-blocked
	start := time.Now()
	ran := make(chan struct{})
	lp.steps <- func() { close(ran) } // accepted only by a new owner
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not move on while a step blocked")
	}
	if took := time.Since(start); took > after+time.Second {
		t.Fatalf("the next step waited %v; want about %v", took, after)
	}
	close(release)
	lp.stop()
	if g := lp.generations(); g != 2 {
		t.Fatalf("%d goroutines owned the loop; want 2", g)
	}
}

// TestStepJustPastTheDelayHandsOverOnce: a step that ends around the delay
// either keeps the loop or hands it over, never both (the loop never has two
// owners): every step runs exactly once.
func TestStepJustPastTheDelayHandsOverOnce(t *testing.T) {
	const after = 200 * time.Microsecond
	lp := newLoop(after)
	var mu sync.Mutex
	var got []int
	for i := range 300 {
		lp.steps <- func() {
			if i%3 == 0 {
				time.Sleep(after) // the subject: a step as long as the delay lands on either side of the timer
			}
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
		}
	}
	lp.stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 300 {
		t.Fatalf("%d steps ran; want 300", len(got))
	}
	seen := map[int]bool{}
	for _, i := range got {
		if seen[i] {
			t.Fatalf("step %d ran twice", i)
		}
		seen[i] = true
	}
}
