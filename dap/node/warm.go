//go:build !windows

package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	cdpdebugger "github.com/chromedp/cdproto/debugger"
	cdpruntime "github.com/chromedp/cdproto/runtime"
)

// Warm nodes. A cold launch is all node's start (~300 ms of a ~330 ms
// start to a breakpoint, BenchmarkDebugWarmStart): the adapter itself runs
// in-process and costs nothing. So a Pool keeps a node already started,
// with --inspect-brk as a cold launch has it, running warmLoader: a
// CommonJS module that holds the event loop with a timer and defines a
// runner. A launch that the warm node reproduces exactly (same node binary
// and environment, no runtimeArgs, no NODE_OPTIONS, whose preloads would
// have run before the session) connects to it and calls the runner with
// the program's argv and cwd: it sets process.argv,
// changes directory, drops its timer and runs the program through
// Module.runMain, as node's own main does, so require.main is the
// program's module and an ES module runs as the entry point.
//
// The entry pause: with --inspect-brk node pauses at the start of every
// CommonJS module it runs as main, and of the first ES module it runs as
// the entry. The loader is CommonJS (its own pause is not taken: no
// debugger is enabled while it starts), so the program, CommonJS or ES,
// makes the same "Break on start" pause a cold launch makes, and the
// launch goes on from there as a cold one: its script is parsed, so
// breakpoints set now bind (verified) at once. The loader's frame and
// the timer frame below it are cut from every stack (trimLoaderLocked): a
// cold CommonJS stack has node's bootstrap frame there instead.
//
// A Pool keeps at most one warm node per node binary: one made for another
// environment replaces it. It is made once a session that could have used
// one has ended (so its start does not compete with the session), ended
// after the idle time, and ended by Close. Output the warm node writes
// before a session takes it is dropped (the loader writes none).

// runnerName is the global the loader defines; readyBinding is the CDP
// binding it calls once it has.
const (
	runnerName   = "__tetherWarmRun"
	readyBinding = "__tetherWarmReady"
)

// warmLoader is the main module of a warm node.
const warmLoader = `// tether's warm node (dap/node/warm.go): held by a timer until the
// adapter calls the runner with a program to run as the main module.
'use strict';
const Module = require('node:module');
delete require.cache[__filename];
const hold = setInterval(() => {}, 1 << 30);
globalThis.` + runnerName + ` = (argv, cwd) => {
  delete globalThis.` + runnerName + `;
  setImmediate(() => {
    clearInterval(hold);
    process.chdir(cwd);
    process.argv = [process.execPath, ...argv];
    Module.runMain();
  });
};
if (typeof globalThis.` + readyBinding + ` === 'function') globalThis.` + readyBinding + `('');
try { delete globalThis.` + readyBinding + `; } catch {}
`

// Pool keeps warm nodes for the launches of one debug manager. Its methods
// are safe for concurrent use; a nil *Pool keeps nothing.
type Pool struct {
	idle   time.Duration
	ctx    context.Context // ends with Close: ends a node being made
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	dir    string               // holds the loader; made on first use, removed by Close
	ready  map[string]*warmNode // by node binary
	making map[string]bool      // a refill for that binary is under way
	// unsupported are the node binaries too old for warm nodes
	// (pausesAtEveryMain): none is made for them again.
	unsupported map[string]bool
	idled       int            // warm nodes ended for idleness
	wg          sync.WaitGroup // refills and idle ends in flight
}

// NewPool returns a Pool whose warm nodes end after idle without use. It
// starts nothing.
func NewPool(idle time.Duration) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{idle: idle, ctx: ctx, cancel: cancel, ready: map[string]*warmNode{}, making: map[string]bool{}, unsupported: map[string]bool{}}
}

// warmKey is what makes a warm node interchangeable with a cold launch.
type warmKey struct {
	node string
	env  string // the environment, NUL-joined
}

// warmNode is one node running the loader, waiting for a launch, with its
// inspector connected and the Runtime and Debugger domains enabled: on a
// node that has run its loader, enabling the debugger costs ~100 ms (V8
// collects its scripts), as much as the rest of a warm start.
type warmNode struct {
	key    warmKey
	proc   *process
	wsURL  string
	conn   *Conn
	events *eventRelay // conn's events, kept until a session takes them
	loader string      // the loader's path, links resolved
	out    *outputSink
	idle   *time.Timer
}

// eventRelay stands between a warm node's inspector connection, whose
// event handler is fixed when it is dialled, and the session that takes
// it: until attach it keeps the events (the scripts V8 reported, the
// execution context; bounded), which attach replays in order before
// passing on every later one. It also tells when the loader is ready.
type eventRelay struct {
	mu    sync.Mutex
	to    func(method string, params jsonv2.Value)
	kept  []keptEvent
	ready chan struct{} // closed when the loader called readyBinding
	once  sync.Once
}

type keptEvent struct {
	method string
	params jsonv2.Value
}

// maxKeptEvents bounds what an unused warm node's events hold: node
// reports ~80 scripts once its loader ran, and nothing after.
const maxKeptEvents = 4096

func (r *eventRelay) event(method string, params jsonv2.Value) {
	if method == cdpruntime.BindingCalled.Method {
		r.once.Do(func() { close(r.ready) })
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.to != nil {
		r.to(method, params)
		return
	}
	if len(r.kept) < maxKeptEvents {
		r.kept = append(r.kept, keptEvent{method, params})
	}
}

func (r *eventRelay) attach(to func(method string, params jsonv2.Value)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.kept {
		to(e.method, e.params)
	}
	r.kept, r.to = nil, to
}

// outputSink forwards a warm node's output to the session that took it,
// and drops what comes before.
type outputSink struct {
	mu sync.Mutex
	to func(category, text string)
}

func (o *outputSink) write(category, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.to != nil {
		o.to(category, text)
	}
}

func (o *outputSink) attach(to func(category, text string)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.to = to
}

// warmKeyOf is the key of a launch, or false when a warm node cannot
// reproduce it.
func warmKeyOf(nodeBin string, env []string, a *launchArgs) (warmKey, bool) {
	if len(a.RuntimeArgs) > 0 {
		return warmKey{}, false
	}
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == "NODE_OPTIONS" && v != "" {
			return warmKey{}, false
		}
	}
	return warmKey{node: nodeBin, env: strings.Join(env, "\x00")}, true
}

func (k warmKey) environ() []string {
	if k.env == "" {
		return []string{}
	}
	return strings.Split(k.env, "\x00")
}

// take hands over the warm node for key, or nil when none is ready for it
// or the one ready has died.
func (p *Pool) take(key warmKey) *warmNode {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	w := p.ready[key.node]
	if w == nil || w.key != key {
		p.mu.Unlock()
		return nil
	}
	delete(p.ready, key.node)
	p.mu.Unlock()
	w.idle.Stop()
	select {
	case <-w.proc.exited:
		w.end() // its connection and output
		return nil
	default:
	}
	return w
}

// refill makes a warm node for key in the background unless one for it is
// ready or being made; one ready for another key of the same binary is
// ended.
func (p *Pool) refill(key warmKey) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.closed || p.making[key.node] || p.unsupported[key.node] {
		p.mu.Unlock()
		return
	}
	old := p.ready[key.node]
	if old != nil && old.key == key {
		p.mu.Unlock()
		return
	}
	delete(p.ready, key.node)
	p.making[key.node] = true
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		if old != nil {
			old.end()
		}
		w, err := p.make(key)
		p.mu.Lock()
		delete(p.making, key.node)
		if errors.Is(err, errNoEntryPause) {
			p.unsupported[key.node] = true // asked once per binary
		}
		if err != nil || p.closed {
			p.mu.Unlock()
			if w != nil {
				w.end()
			}
			return
		}
		p.ready[key.node] = w
		w.idle = time.AfterFunc(p.idle, func() { p.expire(w) })
		p.mu.Unlock()
	}()
}

// make starts node on the loader, waits until the loader has defined its
// runner and enables the debugger, as a session's connect would.
func (p *Pool) make(key warmKey) (*warmNode, error) {
	ctx, cancel := context.WithTimeout(p.ctx, startWait)
	defer cancel()
	loader, err := p.loaderPath()
	if err != nil {
		return nil, err
	}
	w := &warmNode{key: key, loader: loader, out: &outputSink{}}
	w.proc, w.wsURL, err = startNode(ctx, launchSpec{node: key.node, args: []string{loader}, dir: filepath.Dir(loader), env: key.environ()}, w.out.write)
	if err != nil {
		return nil, err
	}
	w.events = &eventRelay{ready: make(chan struct{})}
	conn, err := Dial(ctx, w.wsURL, DialOptions{OnEvent: w.events.event})
	if err != nil {
		return w, err
	}
	w.conn = conn
	for _, step := range []func() error{
		func() error { _, err := cdp.Call(ctx, conn, cdpruntime.Enable, cdp.Empty{}); return err },
		func() error {
			_, err := cdp.Call(ctx, conn, cdpruntime.AddBinding, cdpruntime.AddBindingParams{Name: readyBinding})
			return err
		},
		func() error {
			_, err := cdp.Call(ctx, conn, cdpruntime.RunIfWaitingForDebugger, cdp.Empty{})
			return err
		},
	} {
		if err := step(); err != nil {
			return w, err
		}
	}
	select {
	case <-w.events.ready:
	case <-w.proc.exited:
		return w, fmt.Errorf("the warm node exited with code %d; stderr: %s", w.proc.code, w.proc.stderrTail())
	case <-ctx.Done():
		return w, fmt.Errorf("waiting for the warm node's loader: %w", ctx.Err())
	}
	res, err := cdp.Call(ctx, conn, cdpruntime.Evaluate, cdpruntime.EvaluateParams{Expression: "process.versions.node"})
	if err != nil {
		return w, err
	}
	var version string
	if res.Result != nil {
		_ = json.Unmarshal(res.Result.Value, &version)
	}
	if !pausesAtEveryMain(version) {
		return w, fmt.Errorf("node %q: %w", version, errNoEntryPause)
	}
	// After the loader ran: its own entry pause is not taken.
	if _, err := cdp.Call(ctx, conn, cdpdebugger.Enable, cdpdebugger.EnableParams{}); err != nil {
		return w, err
	}
	_, err = cdp.Call(ctx, conn, cdpdebugger.SetAsyncCallStackDepth, cdpdebugger.SetAsyncCallStackDepthParams{MaxDepth: 0})
	return w, err
}

// errNoEntryPause: a node binary whose version makes no entry pause for
// a warm node's program; its launches start cold, and no warm node is made
// for it again.
var errNoEntryPause = errors.New("pauses only at the first main module it runs, which on a warm node is the loader: its launches start cold")

// pausesAtEveryMain says whether node version v ("20.20.2") makes
// --inspect-brk's "Break on start" pause at every CommonJS module it runs
// as main, which a warm node needs: the program is its second main module,
// after the loader. Node took that with "module: simplify --inspect-brk
// handling" (nodejs/node#55679) in 23.2 and its backports, in 22.x's
// 22.13 and 20.x's 20.19 changelogs; before it, node paused only at the
// module of process.argv[1] as first resolved (the loader's), so the
// program would run to its end unpaused. Older or unreadable versions get
// no warm node.
func pausesAtEveryMain(v string) bool {
	var major, minor int
	if n, _ := fmt.Sscanf(v, "%d.%d", &major, &minor); n != 2 {
		return false
	}
	switch {
	case major >= 24:
		return true
	case major == 23:
		return minor >= 2
	case major == 22:
		return minor >= 13
	case major == 20:
		return minor >= 19
	}
	return false
}

// loaderPath writes the loader into the pool's directory once.
func (p *Pool) loaderPath() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", errors.New("the warm node pool is closed")
	}
	if p.dir == "" {
		dir, err := os.MkdirTemp("", "tether-node-warm-")
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "loader.cjs"), []byte(warmLoader), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
		p.dir = dir
	}
	return cleanPath(filepath.Join(p.dir, "loader.cjs")), nil
}

// expire ends w if it is still the ready one when its idle time is up.
func (p *Pool) expire(w *warmNode) {
	p.mu.Lock()
	if p.ready[w.key.node] != w {
		p.mu.Unlock()
		return
	}
	delete(p.ready, w.key.node)
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	w.end()
	p.mu.Lock()
	p.idled++
	p.mu.Unlock()
}

// end kills a warm node no session took.
func (w *warmNode) end() {
	if w.idle != nil {
		w.idle.Stop()
	}
	if w.conn != nil {
		_ = w.conn.Close()
	}
	w.proc.kill()
}

// Close ends every warm node, waits for the ones being made and removes
// the loader's directory. Later refills make nothing.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	ready := p.ready
	p.ready = map[string]*warmNode{}
	p.mu.Unlock()
	p.cancel()
	for _, w := range ready {
		w.end()
	}
	p.wg.Wait()
	p.mu.Lock()
	dir := p.dir
	p.dir = ""
	p.mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// WarmNode is a warm node ready for the next launch with its binary.
type WarmNode struct {
	Node string
	Pid  int
}

// Ready lists the ready warm nodes, by binary.
func (p *Pool) Ready() []WarmNode {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []WarmNode{}
	for _, w := range p.ready {
		out = append(out, WarmNode{Node: w.key.node, Pid: w.proc.cmd.Process.Pid})
	}
	slices.SortFunc(out, func(a, b WarmNode) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// Idled is how many warm nodes ended for idleness.
func (p *Pool) Idled() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idled
}
