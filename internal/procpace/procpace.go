// Package procpace keeps GOMAXPROCS at 1 while the process uses little
// CPU, and at the runtime's default once it needs more.
//
// A relay at low load spends most of its CPU handing work between
// threads, not doing it: with two Ps, every goroutine a read wakes is run
// by a second thread, which the runtime wakes (a futex) and which spins
// looking for work before it sleeps again. Profiles of a broker answering
// one call at a time showed half its CPU in the kernel's context switch.
// With one P, a woken goroutine runs on the thread that woke it, next; a
// call costs about a quarter less CPU and no latency. Under load one P is
// a bottleneck, so the pacer gives the runtime its default back as soon as
// the process uses more than Up of a core.
//
// What it earns, against the runtime's default (TETHER_TUNING=no-procpace;
// make bench-peers, 2026-12-04, medians of five rounds' ratios): without
// it two brokers on one Redis made 0.81x the calls per CPU-second at c=1,
// at 1.14x the p99; at c=64, 0.97x and 0.96x. One broker alone, on its
// in-memory bus, gains nothing from it (0.98x at c=1) and pays at c=64
// (1.09x the calls per CPU-second without it): the low load it is for is
// the one where calls wait on the bus.
//
// The runtime has no such setting: GOMAXPROCS is fixed unless set, so this
// is done by hand, from the process's own CPU time (getrusage on Unix,
// GetProcessTimes on Windows: each counts every thread, the kernel's time
// in syscalls included) sampled
// every Interval. A change stops the world for a moment; the hysteresis
// (Up at one P, Down for DownAfter at the default) keeps changes rare.
package procpace

import (
	"runtime"
	"sync"
	"time"
)

// Pacer switches GOMAXPROCS between 1 and the runtime's default by load.
// Start it with Start; Stop ends it and gives the runtime its default
// back.
//
// Concurrency: Procs and Stop may be called from any goroutine; the
// pacer's one goroutine ends in Stop.
type Pacer struct {
	// Interval is how often the load is sampled; 100 ms when zero.
	Interval time.Duration
	// Up is the load, in cores over one Interval at one P, that restores
	// the default: the one P is nearly saturated; 0.85 when zero.
	Up float64
	// Down is the load, in cores at the default, under which for DownAfter
	// the pacer goes back to one P; 0.3 when zero.
	Down float64
	// DownAfter is how long the load must stay under Down; 2 s when zero.
	DownAfter time.Duration
	// OnQuiet, when set, runs on the pacer's goroutine each time it goes
	// back to one P: the process was busy and is quiet now.
	OnQuiet func()

	// cpu is the process's CPU time so far: cpuTime, or a test's own
	// load (export_test.go), which the pacer's rule is tested against where
	// a loaded machine would starve real load.
	cpu func() time.Duration

	mu      sync.Mutex
	procs   int // what the pacer set last; 0 before Start
	stop    chan struct{}
	stopped chan struct{}
}

// Start goes to one P and samples the load from now on. It does nothing
// when the runtime's default is one P already.
func (p *Pacer) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil || runtime.GOMAXPROCS(0) <= 1 {
		return
	}
	if p.Interval <= 0 {
		p.Interval = 100 * time.Millisecond
	}
	if p.Up <= 0 {
		p.Up = 0.85
	}
	if p.Down <= 0 {
		p.Down = 0.3
	}
	if p.DownAfter <= 0 {
		p.DownAfter = 2 * time.Second
	}
	if p.cpu == nil {
		p.cpu = cpuTime
	}
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	runtime.GOMAXPROCS(1)
	p.procs = 1
	go p.run()
}

// Stop ends the pacing and restores the runtime's default GOMAXPROCS.
func (p *Pacer) Stop() {
	p.mu.Lock()
	stop, stopped := p.stop, p.stopped
	p.mu.Unlock()
	if stop == nil {
		return
	}
	select {
	case <-stop:
	default:
		close(stop)
	}
	<-stopped
	p.mu.Lock()
	runtime.SetDefaultGOMAXPROCS()
	p.procs = 0
	p.mu.Unlock()
}

// Procs is the GOMAXPROCS the pacer set last: 1, the default's value, or
// 0 when it does not pace.
func (p *Pacer) Procs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.procs
}

func (p *Pacer) run() {
	defer close(p.stopped)
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	lastCPU, lastAt := p.cpu(), time.Now()
	var quietSince time.Time // at the default: since when the load is under Down
	var quiet func()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		cpu, now := p.cpu(), time.Now()
		wall := now.Sub(lastAt)
		if wall <= 0 {
			continue
		}
		load := float64(cpu-lastCPU) / float64(wall)
		lastCPU, lastAt = cpu, now
		p.mu.Lock()
		switch {
		case p.procs == 1 && load >= p.Up:
			runtime.SetDefaultGOMAXPROCS()
			p.procs = runtime.GOMAXPROCS(0)
			quietSince = time.Time{}
		case p.procs > 1 && load >= p.Down:
			quietSince = time.Time{}
		case p.procs > 1 && quietSince.IsZero():
			quietSince = now
		case p.procs > 1 && now.Sub(quietSince) >= p.DownAfter:
			runtime.GOMAXPROCS(1)
			p.procs = 1
			quiet = p.OnQuiet
		}
		p.mu.Unlock()
		if quiet != nil {
			quiet()
			quiet = nil
			lastCPU, lastAt = p.cpu(), time.Now() // its own CPU is not load
		}
	}
}
