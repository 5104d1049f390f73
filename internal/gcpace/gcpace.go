// Package gcpace sets the garbage collector's GOGC after every collection
// so that the heap may grow by a lot relative to a small live heap, but by
// no more than a fixed amount over a large one.
//
// A relay allocates many short-lived buffers per call; with a small live
// heap, collecting when the heap has grown 4x (GOGC=400) rather than 2x
// cuts CPU per call by about a sixth. But the headroom is proportional:
// a broker holding 10,000 connections has a live heap of tens of MB, and
// 4x that is garbage the process keeps as resident memory, more than the
// connections themselves. Pacing caps the headroom at an absolute size, with
// a floor on GOGC so that a large heap is not collected over and over.
//
// The runtime has no such setting: GOMEMLIMIT caps the whole heap, which
// needs to know the machine; so this is done by hand, with debug.SetGCPercent
// from a cleanup that runs once per collection. What it earns, against the
// runtime's GOGC=100 (TETHER_TUNING=no-gcpace; make bench-peers,
// 2026-12-04, one broker, medians of three rounds' ratios): without it the
// broker made 0.87x (c=1) and 0.83x (c=64) the calls per CPU-second, at
// 1.12x and 1.27x the p99, for 1.04x the memory per idle connection.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Pacer keeps GOGC at Headroom over the live heap, between MinPercent and
// MaxPercent. Start it with Start; Stop ends it (GOGC stays where it was).
//
// Concurrency: Percent and Stop may be called from any goroutine.
type Pacer struct {
	// Headroom is the garbage, in bytes, the heap may gather over the
	// live heap before a collection, when GOGC's bounds allow.
	Headroom int64
	// MinPercent and MaxPercent bound GOGC.
	MinPercent, MaxPercent int

	percent atomic.Int64
	stopped atomic.Bool
	sample  []metrics.Sample // used by the cleanup goroutine only
}

// Start sets GOGC for the live heap now and after every collection.
func (p *Pacer) Start() {
	p.sample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	p.pace()
	p.arm()
}

// Stop ends the pacing; GOGC keeps its last value.
func (p *Pacer) Stop() { p.stopped.Store(true) }

// Percent is the GOGC the pacer set last.
func (p *Pacer) Percent() int { return int(p.percent.Load()) }

// arm registers a cleanup on a fresh object: it runs after the collection
// that finds the object unreachable, paces and arms again.
func (p *Pacer) arm() {
	runtime.AddCleanup(new([16]byte), func(p *Pacer) {
		if p.stopped.Load() {
			return
		}
		p.pace()
		p.arm()
	}, p)
}

func (p *Pacer) pace() {
	metrics.Read(p.sample)
	live := int64(0)
	if p.sample[0].Value.Kind() == metrics.KindUint64 {
		live = int64(p.sample[0].Value.Uint64())
	}
	pct := int64(p.MaxPercent)
	if live > 0 {
		pct = min(max(100*p.Headroom/live, int64(p.MinPercent)), int64(p.MaxPercent))
	}
	if p.percent.Swap(pct) != pct {
		debug.SetGCPercent(int(pct))
	}
}
