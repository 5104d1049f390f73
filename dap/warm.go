//go:build !windows

package dap

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/dap/node"
)

// Warm adapters: a start of a language the workspace has used before takes
// an adapter process that is already started and initialized, instead of
// paying for both (lldb-dap loads liblldb and builds its debugger, debugpy
// imports its adapter, dlv starts its server). The pool keeps at most one
// per adapter kind, made once a session of that kind has ended (in the
// background, for the next start), ended after Config.WarmIdle without use, and ended with
// the manager. A warm adapter is one a cold start would have made: the same
// command, environment, working directory and initialize arguments (the
// key); a start whose key differs starts cold and the warm one is replaced
// by one for the new key. debugpy's warm adapter also starts its launcher
// and debuggee ahead (warm_debugpy.go). Dialled adapters have no process to
// keep warm; the built-in Node adapter runs in-process, and what it keeps
// warm is the node it would launch (dap/node's Pool, warm_node.go).
//
// Measured by BenchmarkDebugWarmStart (e2e/bench); docs/debugging.md has
// the figures and the idle cost.

// DefaultWarmIdle is how long an unused warm adapter is kept.
const DefaultWarmIdle = 10 * time.Minute

// warmKey is what makes a warm adapter interchangeable with a cold one.
type warmKey struct {
	adapter  string
	path     string
	args     string // Command.Args, NUL-joined
	env      string // Command.Env, NUL-joined
	dir      string
	children bool // initialize advertised startDebugging
}

func keyOf(a Adapter, spec Command, dir string, children bool) (warmKey, bool) {
	if spec.Dial != "" || spec.Serve != nil {
		return warmKey{}, false
	}
	return warmKey{adapter: a.Name(), path: spec.Path, args: joinNUL(spec.Args), env: joinNUL(spec.Env), dir: dir, children: children}, true
}

func joinNUL(s []string) string {
	b := []byte{}
	for _, x := range s {
		b = append(append(b, x...), 0)
	}
	return string(b)
}

// warmAdapter is one started and initialized adapter waiting for a session.
type warmAdapter struct {
	key   warmKey
	proc  *adapterProc
	caps  json.RawMessage
	relay *relay
	idle  *time.Timer
}

// warmPool holds the warm adapters of one manager. Its methods are safe for
// concurrent use; close ends every warm adapter and waits for the ones
// being made.
type warmPool struct {
	idle    time.Duration
	env     *Env // the manager's: adapters run with env.Environ
	log     zerolog.Logger
	closing context.Context // the manager's: ends a warm adapter being made

	mu     sync.Mutex
	closed bool
	ready  map[string]*warmAdapter // by adapter name: at most one per kind
	making map[string]bool         // a refill of that kind is under way
	idled  int                     // warm adapters ended for idleness
	made   int                     // warm adapters made ready so far
	wg     sync.WaitGroup          // refills and idle ends in flight

	builds  warmBuilds  // prebuilt programs (warm_build.go)
	scripts warmScripts // helper scripts of warm adapters (warm_debugpy.go)
	nodes   *node.Pool  // the built-in Node adapter's warm nodes (warm_node.go)
}

func newWarmPool(idle time.Duration, env *Env, log zerolog.Logger, closing context.Context) *warmPool {
	if idle <= 0 {
		idle = DefaultWarmIdle
	}
	return &warmPool{idle: idle, env: env, log: log, closing: closing,
		ready: map[string]*warmAdapter{}, making: map[string]bool{}, nodes: newNodePool(idle, env)}
}

// take hands over the warm adapter for key, or nil when none is ready or
// the one ready has died. Either way it returns refill, which makes the
// next one for key in the background (nil when warm adapters are off or
// none stands for this adapter): the taker calls it once its session
// has ended, so that the replacement's start (lldb-dap's is ~400 ms of
// CPU) does not compete with the session it would only slow down
// (BenchmarkDebugWarmStart measured C's warm starts slower than cold ones
// on 2 cores when the replacement started at once). The taker attaches its
// handlers to the adapter's relay once it owns the process. cfg is the
// taker's launch configuration, which the replacement may prepare for
// (warmPreparer).
func (p *warmPool) take(a Adapter, spec Command, dir string, environ []string, children bool, cfg map[string]any) (w *warmAdapter, refill func()) {
	if p == nil {
		return nil, nil
	}
	key, ok := keyOf(a, spec, dir, children)
	if !ok || !slices.Equal(environ, p.env.Environ) {
		return nil, nil
	}
	last := maps.Clone(cfg)
	refill = func() { p.refill(a, spec, key, last) }
	p.mu.Lock()
	w = p.ready[key.adapter]
	if w != nil && w.key == key {
		delete(p.ready, key.adapter)
	} else {
		w = nil
	}
	p.mu.Unlock()
	if w == nil {
		return nil, refill
	}
	w.idle.Stop()
	select {
	case <-w.proc.client.Done():
		p.end(w)
		return nil, refill
	default:
	}
	return w, refill
}

// refill makes a warm adapter for key in the background unless one for it
// is ready or being made; one ready for another key of the same kind is
// ended (at most one per kind).
func (p *warmPool) refill(a Adapter, spec Command, key warmKey, last map[string]any) {
	p.mu.Lock()
	if p.closed || p.making[key.adapter] {
		p.mu.Unlock()
		return
	}
	old := p.ready[key.adapter]
	if old != nil && old.key == key {
		p.mu.Unlock()
		return
	}
	delete(p.ready, key.adapter)
	p.making[key.adapter] = true
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		if old != nil {
			p.end(old)
		}
		w, err := p.make(a, spec, key, last)
		p.mu.Lock()
		delete(p.making, key.adapter)
		if err != nil || p.closed {
			p.mu.Unlock()
			if err != nil {
				p.log.Debug().Str("adapter", key.adapter).Err(err).Msg("no warm debug adapter")
			}
			if w != nil {
				p.end(w)
			}
			return
		}
		p.ready[key.adapter] = w
		w.idle = time.AfterFunc(p.idle, func() { p.expire(w) })
		p.made++
		made := p.made
		p.mu.Unlock()
		p.log.Debug().Str("adapter", key.adapter).Int("pid", w.proc.cmd.Process.Pid).Int("made", made).Msg("warm debug adapter ready")
	}()
}

// make starts and initializes one adapter for key, and lets it prepare
// for a launch like last.
func (p *warmPool) make(a Adapter, spec Command, key warmKey, last map[string]any) (*warmAdapter, error) {
	ctx, cancel := context.WithTimeout(p.closing, 30*time.Second)
	defer cancel()
	r := &relay{}
	if wc, ok := a.(warmCommander); ok {
		warm, err := wc.warmCommand(spec, &p.scripts)
		if err != nil {
			return nil, err
		}
		spec = warm
	}
	proc, err := startAdapter(ctx, spec, key.dir, p.env.Environ, handlers{event: r.event, request: r.request, adapter: a.Name()})
	if err != nil {
		return nil, err
	}
	w := &warmAdapter{key: key, proc: proc, relay: r}
	if err := proc.client.Do(ctx, "initialize", initializeArgs(a, key.children), &w.caps); err != nil {
		return w, err
	}
	if len(w.caps) == 0 {
		w.caps = json.RawMessage("{}")
	}
	if wp, ok := a.(warmPreparer); ok {
		r.prepare()
		err := wp.prepareWarm(ctx, proc.client, last)
		if err != nil {
			return w, err
		}
	}
	return w, nil
}

// expire ends w if it is still the ready one when its idle time is up.
func (p *warmPool) expire(w *warmAdapter) {
	p.mu.Lock()
	if p.ready[w.key.adapter] != w {
		p.mu.Unlock()
		return
	}
	delete(p.ready, w.key.adapter)
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	p.end(w)
	p.mu.Lock()
	p.idled++
	p.mu.Unlock()
}

// end stops a warm adapter that no session took: it has no debuggee, so
// closing its connection ends it, and its process tree is killed after a
// short grace.
func (p *warmPool) end(w *warmAdapter) {
	if w.idle != nil {
		w.idle.Stop()
	}
	w.proc.stop(exitGrace)
}

// close ends every warm adapter and waits for the ones being made.
func (p *warmPool) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = map[string]*warmAdapter{}
	p.mu.Unlock()
	for _, w := range ready {
		p.end(w)
	}
	p.wg.Wait()
	p.nodes.Close()
	p.builds.remove()
	p.scripts.remove()
}

// WarmAdapter describes a warm adapter ready for the next start of its
// kind: which adapter, its process and the directory it works in.
type WarmAdapter struct {
	Adapter string
	Pid     int
	Dir     string
}

// list lists the ready warm adapters, by adapter name.
func (p *warmPool) list() []WarmAdapter {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []WarmAdapter{}
	for _, w := range p.ready {
		out = append(out, WarmAdapter{Adapter: w.key.adapter, Pid: w.proc.cmd.Process.Pid, Dir: w.key.dir})
	}
	out = append(out, warmNodes(p.nodes)...)
	slices.SortFunc(out, func(a, b WarmAdapter) int {
		if a.Adapter < b.Adapter {
			return -1
		}
		if a.Adapter > b.Adapter {
			return 1
		}
		return 0
	})
	return out
}

// relay stands between a warm adapter's client and the session that takes
// it: the client's handlers are fixed when it is made, the session comes
// later. Until attach, events are kept (in order, bounded) and reverse
// requests declined; attach delivers the kept events, then every later
// one goes straight to the session.
type relay struct {
	mu     sync.Mutex
	h      *handlers
	events []*Message
	// prepared: the adapter has been prepared (warmPreparer); what it says
	// from then until a session takes it is the preparation's (output
	// events it sends out of step with the responses: lldb's warnings
	// while it indexes), not the session's, and is dropped.
	prepared bool
}

// maxWarmEvents bounds what a warm adapter's events can hold: an idle
// adapter says little (lldb-dap and debugpy nothing, delve nothing), and
// what it says past this is dropped.
const maxWarmEvents = 64

func (r *relay) event(m *Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h == nil {
		if len(r.events) < maxWarmEvents && !r.prepared {
			r.events = append(r.events, m)
		}
		return
	}
	if r.h.event != nil {
		r.h.event(m)
	}
}

var errNotInSession = errors.New("tether: the adapter is not in a session yet")

func (r *relay) request(m *Message) error {
	r.mu.Lock()
	h := r.h
	r.mu.Unlock()
	if h == nil {
		return errNotInSession
	}
	if h.request == nil {
		return errors.New("tether does not support the reverse request " + m.Command)
	}
	return h.request(m)
}

// prepare drops every event from now until a session takes the adapter
// (relay.prepared).
func (r *relay) prepare() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prepared = true
}

func (r *relay) attach(h handlers) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h = &h
	for _, m := range r.events {
		if h.event != nil {
			h.event(m)
		}
	}
	r.events = nil
}
