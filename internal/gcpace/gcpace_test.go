package gcpace_test

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/gcpace"
	"github.com/tetherdev/tether/internal/testwait"
)

// waitPercent collects until the pacer has set want, or fails after 10s.
func waitPercent(t *testing.T, p *gcpace.Pacer, ok func(int) bool, what string) {
	t.Helper()
	// The pacer's cleanup runs after a GC, on its own goroutine: collect
	// between looks.
	if !testwait.Within(10*time.Second, func() bool {
		if ok(p.Percent()) {
			return true
		}
		runtime.GC()
		return false
	}) {
		t.Fatalf("GOGC %d after 10s, want %s", p.Percent(), what)
	}
}

func TestPacerCapsHeadroomOverALargeHeapAndLiftsItOverASmallOne(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	p := &gcpace.Pacer{Headroom: 8 << 20, MinPercent: 25, MaxPercent: 400}
	p.Start()
	defer p.Stop()

	// A small live heap: GOGC goes to the maximum.
	waitPercent(t, p, func(pct int) bool { return pct == 400 }, "400 over a small heap")

	// 32 MB live: 8 MB of headroom is GOGC 25 (the floor is 25).
	slab := make([]byte, 32<<20)
	for i := range slab {
		slab[i] = byte(i)
	}
	waitPercent(t, p, func(pct int) bool { return pct == 25 }, "25 over 32 MB")
	// The runtime has it too.
	if got := debug.SetGCPercent(25); got != 25 {
		t.Fatalf("runtime GOGC is %d, want 25", got)
	}

	// 16 MB live: 8 MB is about GOGC 50 (a little less: the rest of the
	// heap is live too).
	runtime.KeepAlive(slab)
	slab = nil
	small := make([]byte, 16<<20)
	for i := range small {
		small[i] = byte(i)
	}
	waitPercent(t, p, func(pct int) bool { return pct > 40 && pct <= 50 }, "about 50 over 16 MB")
	runtime.KeepAlive(small)

	small = nil
	waitPercent(t, p, func(pct int) bool { return pct == 400 }, "400 once the heap is small again")
	runtime.KeepAlive(small)
}

func TestStoppedPacerLeavesGOGCAlone(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	p := &gcpace.Pacer{Headroom: 8 << 20, MinPercent: 25, MaxPercent: 400}
	p.Start()
	waitPercent(t, p, func(pct int) bool { return pct == 400 }, "400 over a small heap")
	p.Stop()
	runtime.GC()
	debug.SetGCPercent(77)
	slab := make([]byte, 32<<20)
	for range 3 {
		runtime.GC()
	}
	// What is tested is that nothing happens: a stopped pacer's cleanup
	// would run on its own goroutine after these collections, and nothing
	// signals that it did not, so give it the time it would take.
	time.Sleep(50 * time.Millisecond)
	if got := debug.SetGCPercent(77); got != 77 {
		t.Fatalf("a stopped pacer changed GOGC to %d", got)
	}
	runtime.KeepAlive(slab)
}
