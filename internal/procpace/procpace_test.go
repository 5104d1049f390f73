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

func TestPacerRunsOnOnePWhileIdleAndOnAllUnderLoad(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: nothing to pace")
	}
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	if def < 2 {
		t.Skipf("the runtime's default is %d P", def)
	}
	var quiets atomic.Int32
	p := &procpace.Pacer{Interval: 20 * time.Millisecond, Up: 0.5, Down: 0.2, DownAfter: 200 * time.Millisecond, OnQuiet: func() { quiets.Add(1) }}
	p.Start()
	defer p.Stop()
	if got := runtime.GOMAXPROCS(0); got != 1 || p.Procs() != 1 {
		t.Fatalf("after Start GOMAXPROCS is %d (pacer: %d), want 1", got, p.Procs())
	}

	// Two goroutines that spin: a core's worth of load on the one P.
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
	start := time.Now()
	waitProcs(t, p, func(n int) bool { return n == def }, "the default under load")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to give the default back under load, want well under 2s", d)
	}
	stop.Store(true)
	wg.Wait()

	// Quiet again: back to one P after DownAfter.
	quiet := time.Now()
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
