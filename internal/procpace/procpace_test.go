package procpace_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/procpace"
	"github.com/tetherdev/tether/internal/testwait"
)

// waitProcs waits until the pacer has set GOMAXPROCS as ok wants, or fails
// after 10 s.
func waitProcs(t *testing.T, p *procpace.Pacer, ok func(int) bool, what string) {
	t.Helper()
	if !testwait.Within(10*time.Second, func() bool { return ok(p.Procs()) && ok(runtime.GOMAXPROCS(0)) }) {
		t.Fatalf("GOMAXPROCS %d (pacer: %d) after 10s, want %s", runtime.GOMAXPROCS(0), p.Procs(), what)
	}
}

// load is a process's CPU time as a test sets it: rate cores from the
// last set on. The pacer's rule is tested against it because real load
// lies on a loaded machine: two spinning goroutines that the kernel
// starves measure as quiet, and the pacer rightly goes down while they
// spin.
type load struct {
	mu   sync.Mutex
	rate float64
	cpu  time.Duration
	at   time.Time
}

func newLoad() *load { return &load{at: time.Now()} }

func (l *load) advance() {
	now := time.Now()
	l.cpu += time.Duration(float64(now.Sub(l.at)) * l.rate)
	l.at = now
}

// set makes the load rate cores from now on.
func (l *load) set(rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advance()
	l.rate = rate
}

func (l *load) read() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advance()
	return l.cpu
}

// defaultProcs is the runtime's default GOMAXPROCS, or a skip when there
// is nothing to pace.
func defaultProcs(t *testing.T) int {
	t.Helper()
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: nothing to pace")
	}
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	if def < 2 {
		t.Skipf("the runtime's default is %d P", def)
	}
	return def
}

func TestPacerRunsOnOnePWhileIdleAndOnAllUnderLoad(t *testing.T) {
	def := defaultProcs(t)
	l := newLoad()
	var quiets atomic.Int32
	p := &procpace.Pacer{Interval: 20 * time.Millisecond, Up: 0.5, Down: 0.2, DownAfter: 200 * time.Millisecond, OnQuiet: func() { quiets.Add(1) }}
	procpace.SetCPU(p, l.read)
	p.Start()
	defer p.Stop()
	if got := runtime.GOMAXPROCS(0); got != 1 || p.Procs() != 1 {
		t.Fatalf("after Start GOMAXPROCS is %d (pacer: %d), want 1", got, p.Procs())
	}

	// A core and a half of load: the one P is saturated.
	l.set(1.5)
	start := time.Now()
	waitProcs(t, p, func(n int) bool { return n == def }, "the default under load")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to give the default back under load, want well under 2s", d)
	}

	// Quiet again: back to one P, and not before DownAfter of quiet. Every
	// sample after the set sees it, so the quiet the pacer counts starts
	// no earlier than quiet.
	quiet := time.Now()
	l.set(0)
	waitProcs(t, p, func(n int) bool { return n == 1 }, "1 once quiet")
	if d := time.Since(quiet); d < 200*time.Millisecond {
		t.Errorf("back to one P after %v of quiet, want at least DownAfter (200ms)", d)
	}
	if n := quiets.Load(); n != 1 {
		t.Errorf("OnQuiet ran %d times for one busy spell, want 1", n)
	}

	p.Stop()
	if got := runtime.GOMAXPROCS(0); got != def || p.Procs() != 0 {
		t.Fatalf("after Stop GOMAXPROCS is %d (pacer: %d), want the default %d", got, p.Procs(), def)
	}
}

// TestPacerFollowsTheProcessCPUTime runs the pacer on the process's real
// CPU time: goroutines that spin raise it, and it goes back once they
// stop. Its thresholds are low and it has no time bound but the wait's,
// so that a loaded machine that starves the spinners still lets it pass.
func TestPacerFollowsTheProcessCPUTime(t *testing.T) {
	def := defaultProcs(t)
	p := &procpace.Pacer{Interval: 20 * time.Millisecond, Up: 0.1, Down: 0.05, DownAfter: 100 * time.Millisecond}
	p.Start()
	defer p.Stop()

	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				for i := 0; i < 1000; i++ {
					_ = i * i
				}
			}
		})
	}
	waitProcs(t, p, func(n int) bool { return n == def }, "the default while goroutines spin")
	stop.Store(true)
	wg.Wait()
	waitProcs(t, p, func(n int) bool { return n == 1 }, "1 once they stopped")
}

func TestPacerStartAndStopAreIdempotent(t *testing.T) {
	p := &procpace.Pacer{}
	p.Stop() // not started: nothing to do
	p.Start()
	p.Start()
	p.Stop()
	p.Stop()
	if p.Procs() != 0 {
		t.Fatalf("Procs after Stop = %d, want 0", p.Procs())
	}
}
