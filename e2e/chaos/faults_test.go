package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// The fault injector: at random times (exponentially distributed, mean
// cfg.faultEvery) it picks a kind of fault by weight and a target that no
// other fault holds, injects the fault, and waits until the system has
// recovered from it, which it observes (a broker answers /readyz, a
// workspace's owner holds it again with a connection made after the fault).
// A fault's window is [start, end], end being that observed recovery; a
// fault whose recovery is not seen within recoverWait is a violation.

// recoverWait bounds how long a fault may take to heal.
const recoverWait = 45 * time.Second

// maxActiveFaults bounds the faults in progress at once.
const maxActiveFaults = 3

// scope is what a fault may affect: one workspace's connection, one
// broker (every call entering or owned by it), everything (Redis), or no
// call at all (an answer the broker must drop).
type scope uint8

const (
	scopeNone scope = iota
	scopeWorkspace
	scopeBroker
	scopeAll
	// scopeHost: the machine stopped running the run's processes for a
	// while (observed, not injected: see watchHost). It touches every call
	// and may end any connection (a heartbeat not answered in time).
	scopeHost
)

// fault is one injected fault, as the fault log keeps it.
type fault struct {
	kind   string
	target string // a workspace id, a broker name, "redis", or a correlation id
	scope  scope
	idx    int // the workspace's or the broker's index
	start  time.Time
	end    time.Time
	note   string
	// failed says why the system did not recover, if it did not.
	failed string
	// stall is a host stall's length (its window reaches further).
	stall time.Duration
}

type faultKind struct {
	name   string
	weight int
	// inject carries out the fault on f (its kind and start are set) and
	// returns once the system recovered, or with an error saying why it
	// did not. It returns errNoTarget when no target is free.
	inject func(r *run, rng *rand.Rand, f *fault) error
}

var errNoTarget = fmt.Errorf("no free target")

var faultKinds = []faultKind{
	{"bridge_kill", 12, (*run).bridgeKill},
	{"socket_cut", 12, (*run).socketCut},
	{"partition", 6, (*run).partition},
	{"broker_kill", 5, (*run).brokerKill},
	{"broker_restart", 2, (*run).brokerRestart},
	{"takeover", 6, (*run).takeover},
	{"redis_restart", 2, (*run).redisRestart},
	{"redis_pause", 3, (*run).redisPause},
	{"client_stall", 8, (*run).clientStall},
	{"client_drop", 8, (*run).clientDrop},
	{"forged_answer", 12, (*run).forge},
}

// faultLog is the run's faults. Safe for concurrent use.
type faultLog struct {
	mu     sync.Mutex
	faults []*fault
	busy   map[string]bool // targets held by a fault in progress
	active int
}

// claim reserves target for a fault; false if another fault holds it or
// too many are in progress.
func (l *faultLog) claim(target string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[target] {
		return false
	}
	l.busy[target] = true
	return true
}

func (l *faultLog) release(target string) {
	l.mu.Lock()
	delete(l.busy, target)
	l.mu.Unlock()
}

func (l *faultLog) add(f *fault) {
	l.mu.Lock()
	l.faults = append(l.faults, f)
	l.mu.Unlock()
}

func (l *faultLog) all() []*fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*fault(nil), l.faults...)
}

// injectFaults runs the injector until stop is closed, then waits for the
// faults in progress to recover.
func (r *run) injectFaults(stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(r.cfg.seed, 2))
	total := 0
	for _, k := range faultKinds {
		total += k.weight
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		wait := time.Duration(rng.ExpFloat64() * float64(r.cfg.faultEvery))
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		r.faults.mu.Lock()
		full := r.faults.active >= maxActiveFaults
		if !full {
			r.faults.active++
		}
		r.faults.mu.Unlock()
		if full {
			continue
		}
		n := rng.IntN(total)
		var kind faultKind
		for _, k := range faultKinds {
			if n < k.weight {
				kind = k
				break
			}
			n -= k.weight
		}
		frng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() {
			defer func() {
				r.faults.mu.Lock()
				r.faults.active--
				r.faults.mu.Unlock()
			}()
			f := &fault{kind: kind.name, start: time.Now()}
			err := kind.inject(r, frng, f)
			if err == errNoTarget {
				return
			}
			f.end = time.Now()
			if err != nil {
				f.failed = err.Error()
			}
			r.faults.add(f)
		})
	}
}

// pick returns a random free workspace (bridges or clients) and claims
// it; nil if none is free.
func (r *run) pick(rng *rand.Rand, bridges bool) *workspace {
	var cands []*workspace
	for _, w := range r.topo.spaces {
		if w.bridge() == bridges {
			cands = append(cands, w)
		}
	}
	for _, i := range rng.Perm(len(cands)) {
		if r.faults.claim("ws:" + cands[i].id) {
			return cands[i]
		}
	}
	return nil
}

// stallGap is how late the host watcher's 50 ms tick must be to count as
// a host stall.
const stallGap = 250 * time.Millisecond

// watchHost records every stretch of time in which this process was not
// scheduled for longer than stallGap, as a host_stall fault: on a shared
// machine whose CPUs are all busy (the run's own processes and others'),
// every process may stop for seconds, and no deadline can hold through
// that. The summary counts them, so a run that they dominate shows it.
func (r *run) watchHost(stop <-chan struct{}) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			if gap := now.Sub(last); gap > stallGap {
				// A stall of a second or more can outlast a heartbeat's
				// slack: its consequences (a connection closed for a pong
				// that came late, and its reconnection) play out within a
				// heartbeat's whole timeout after it.
				end := now
				if gap >= time.Second {
					end = now.Add(r.cfg.pingInterval + r.cfg.pingTimeout)
				}
				r.faults.add(&fault{kind: "host_stall", target: "host", scope: scopeHost, start: last, end: end, stall: gap,
					note: "not scheduled for " + gap.Round(time.Millisecond).String()})
			}
			last = now
		}
	}
}

func (r *run) recoverCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), recoverWait)
}

func (f *fault) on(w *workspace) {
	f.target, f.scope, f.idx = w.id, scopeWorkspace, w.idx
}

// bridgeKill: kill -9 of a bridge process, a restart after up to a second.
// The killed bridge must leave no process running (its terminal reaper
// ends its commands).
func (r *run) bridgeKill(rng *rand.Rand, f *fault) error {
	w := r.pick(rng, true)
	if w == nil {
		return errNoTarget
	}
	defer r.faults.release("ws:" + w.id)
	f.on(w)
	f.start = time.Now()
	if left := w.killBridge(3 * time.Second); len(left) > 0 {
		r.violate(violation{kind: "process_left", detail: fmt.Sprintf("bridge %s killed with -9 left processes running after 3s: %v", w.id, left), at: time.Now()})
	}
	time.Sleep(time.Duration(rng.Int64N(int64(time.Second)))) // the fault's schedule: down for up to a second
	restart := time.Now()
	if err := w.startBridge(); err != nil {
		return err
	}
	ctx, cancel := r.recoverCtx()
	defer cancel()
	return r.topo.waitHeld(ctx, restart, w)
}

// socketCut closes a bridge's socket, preferably while a call to it is in
// flight; the bridge reconnects by itself.
func (r *run) socketCut(rng *rand.Rand, f *fault) error {
	w := r.busyBridge()
	if w == nil {
		w = r.pick(rng, true)
	}
	if w == nil {
		return errNoTarget
	}
	defer r.faults.release("ws:" + w.id)
	f.on(w)
	f.start = time.Now()
	f.note = fmt.Sprintf("%d connections closed", w.proxy.cut())
	ctx, cancel := r.recoverCtx()
	defer cancel()
	return r.topo.waitHeld(ctx, f.start, w)
}

// busyBridge claims a bridge with a call in flight, preferring a
// terminal call (200 ms long); nil if none.
func (r *run) busyBridge() *workspace {
	r.mu.Lock()
	var best *workspace
	for _, c := range r.inflight {
		if c.ws.bridge() && (best == nil || c.act == actTerminal) {
			best = c.ws
			if c.act == actTerminal {
				break
			}
		}
	}
	r.mu.Unlock()
	if best != nil && r.faults.claim("ws:"+best.id) {
		return best
	}
	return nil
}

// partition stops all traffic between a bridge and its broker for 0.5 to
// 4 s, then lets it flow again. The connection may survive (the heartbeat
// had not given up yet) or be replaced; the fault ends once a heartbeat's
// whole timeout has passed after healing and the workspace is held.
func (r *run) partition(rng *rand.Rand, f *fault) error {
	w := r.pick(rng, true)
	if w == nil {
		return errNoTarget
	}
	defer r.faults.release("ws:" + w.id)
	f.on(w)
	d := 500*time.Millisecond + time.Duration(rng.Int64N(int64(3500*time.Millisecond)))
	f.note = "for " + d.Round(time.Millisecond).String()
	f.start = time.Now()
	w.proxy.partition()
	time.Sleep(d) // the fault's schedule: partitioned for d
	w.proxy.heal()
	time.Sleep(r.cfg.pingInterval + r.cfg.pingTimeout) // and it lasts a heartbeat's whole timeout past healing
	ctx, cancel := r.recoverCtx()
	defer cancel()
	return r.topo.waitHeld(ctx, time.Time{}, w)
}

// brokerKill: kill -9 of a broker, restarted on its address after 0.2 to
// 1.5 s.
func (r *run) brokerKill(rng *rand.Rand, f *fault) error {
	return r.bounceBroker(rng, f, func(b *brokerNode) {
		b.kill()
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(1300*time.Millisecond)))) // the fault's schedule: down for 0.2 to 1.5 s
	})
}

// brokerRestart stops a broker as an operator would (SIGTERM: it drains
// its calls for up to 2 s, answers the rest broker_shutdown and tells
// every client why it disconnects) and starts it again at once.
func (r *run) brokerRestart(rng *rand.Rand, f *fault) error {
	return r.bounceBroker(rng, f, func(b *brokerNode) {
		if err := b.stop(); err != nil {
			r.violate(violation{kind: "bad_shutdown", at: time.Now(), detail: fmt.Sprintf("broker %s on SIGTERM: %v", b.name, err)})
		}
	})
}

// bounceBroker takes a random broker down with down and starts it again
// on its address, one broker at a time; it has recovered once every
// workspace it owns is connected to it again.
func (r *run) bounceBroker(rng *rand.Rand, f *fault, down func(*brokerNode)) error {
	if !r.faults.claim("brokers") {
		return errNoTarget
	}
	defer r.faults.release("brokers")
	b := r.topo.brokers[rng.IntN(len(r.topo.brokers))]
	f.target, f.scope, f.idx = b.name, scopeBroker, b.idx
	f.start = time.Now()
	down(b)
	restart := time.Now()
	if err := b.start(); err != nil {
		return err
	}
	ctx, cancel := r.recoverCtx()
	defer cancel()
	return r.topo.waitHeld(ctx, restart, r.owned(b)...)
}

// owned lists the workspaces broker b owns.
func (r *run) owned(b *brokerNode) []*workspace {
	var out []*workspace
	for _, w := range r.topo.spaces {
		if w.owner == b.idx {
			out = append(out, w)
		}
	}
	return out
}

// takeover connects a second socket.io client for a client's workspace to
// another broker for 1 to 3 s. Each connection replaces the other on
// connecting, and each takes the workspace back 200 to 500 ms after it was
// replaced, so the workspace moves between the two brokers several times;
// then the second client leaves and the first takes the workspace back for
// good. Every call must still reach one client at most, and be answered
// once.
func (r *run) takeover(rng *rand.Rand, f *fault) error {
	w := r.pick(rng, false)
	if w == nil {
		return errNoTarget
	}
	defer r.faults.release("ws:" + w.id)
	f.on(w)
	other := r.topo.brokers[(w.owner+1+rng.IntN(len(r.topo.brokers)-1))%len(r.topo.brokers)]
	d := time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
	f.note = fmt.Sprintf("from %s for %s", other.name, d.Round(time.Millisecond))
	f.start = time.Now()
	c, err := w.startClient(other, "takeover "+w.id)
	if err != nil {
		return err
	}
	time.Sleep(d) // the fault's schedule: the second client stays for d
	if err := c.stop(); err != nil {
		r.violate(violation{kind: "bad_exit", at: time.Now(), detail: err.Error()})
	}
	// Held by its own broker again: by the first client (the second was on
	// another), whether or not it was the one holding when the second left.
	ctx, cancel := r.recoverCtx()
	defer cancel()
	return r.topo.waitHeld(ctx, time.Time{}, w)
}

// redisRestart stops redis-server, starts it again (empty) after up to a
// second; it has recovered once every broker and the run's own Redis
// callers are ready again and every workspace is held.
func (r *run) redisRestart(rng *rand.Rand, f *fault) error {
	if !r.faults.claim("redis") {
		return errNoTarget
	}
	defer r.faults.release("redis")
	f.target, f.scope = "redis", scopeAll
	f.start = time.Now()
	r.topo.redis.Stop()
	time.Sleep(time.Duration(rng.Int64N(int64(time.Second)))) // the fault's schedule: down for up to a second
	r.topo.redis.Restart()
	return r.waitRedis()
}

// redisPause: CLIENT PAUSE for 0.3 to 1.5 s, every command.
func (r *run) redisPause(rng *rand.Rand, f *fault) error {
	if !r.faults.claim("redis") {
		return errNoTarget
	}
	defer r.faults.release("redis")
	f.target, f.scope = "redis", scopeAll
	d := 300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond)))
	f.note = "for " + d.Round(time.Millisecond).String()
	f.start = time.Now()
	if _, err := r.topo.redis.Do("CLIENT", "PAUSE", strconv.FormatInt(d.Milliseconds(), 10), "ALL"); err != nil {
		return fmt.Errorf("CLIENT PAUSE: %w", err)
	}
	time.Sleep(d) // the fault's schedule: Redis ends the pause by itself after d
	return r.waitRedis()
}

func (r *run) waitRedis() error {
	ctx, cancel := r.recoverCtx()
	defer cancel()
	for {
		err := r.busRedis.Ready(ctx)
		for _, b := range r.topo.brokers {
			if err == nil && !r.topo.ready(b.url) {
				err = fmt.Errorf("broker %s is not ready", b.name)
			}
		}
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after the Redis fault: %w", err)
		case <-time.After(50 * time.Millisecond):
			// Every 50 ms, as waitHeld: the brokers under test answer each look.
		}
	}
	return r.topo.waitHeld(ctx, time.Time{}, r.topo.spaces...)
}

// clientStall makes a socket.io client stop reading for 0.5 to 4 s (a slow
// consumer); like a partition, it ends a heartbeat's timeout after.
func (r *run) clientStall(rng *rand.Rand, f *fault) error {
	w := r.pick(rng, false)
	if w == nil {
		return errNoTarget
	}
	defer r.faults.release("ws:" + w.id)
	f.on(w)
	d := 500*time.Millisecond + time.Duration(rng.Int64N(int64(3500*time.Millisecond)))
	f.note = "for " + d.Round(time.Millisecond).String()
	f.start = time.Now()
	if err := w.client.send(map[string]any{"cmd": "stall", "ms": d.Milliseconds()}); err != nil {
		return err
	}
	time.Sleep(d + r.cfg.pingInterval + r.cfg.pingTimeout) // the fault's schedule: the stall, then a heartbeat's whole timeout
	ctx, cancel := r.recoverCtx()
	defer cancel()
	return r.topo.waitHeld(ctx, time.Time{}, w)
}

// clientDrop destroys a socket.io client's TCP connection (no close
// frame); the client reconnects by itself.
func (r *run) clientDrop(rng *rand.Rand, f *fault) error {
	w := r.pick(rng, false)
	if w == nil {
		return errNoTarget
	}
	defer r.faults.release("ws:" + w.id)
	f.on(w)
	f.start = time.Now()
	if err := w.client.send(map[string]any{"cmd": "drop"}); err != nil {
		return err
	}
	ctx, cancel := r.recoverCtx()
	defer cancel()
	return r.topo.waitHeld(ctx, f.start, w)
}

// forge makes a socket.io client answer a call in flight to another
// workspace, preferably one on the same broker. The broker must drop the
// answer: the call it names must get its own workspace's answer. It
// touches no call (its scope is none): the call it targets must succeed.
func (r *run) forge(rng *rand.Rand, f *fault) error {
	w := r.pick(rng, false)
	if w == nil {
		return errNoTarget
	}
	defer r.faults.release("ws:" + w.id)
	r.mu.Lock()
	var target *call
	for _, c := range r.inflight {
		if c.ws != w && (target == nil || c.ws.owner == w.owner) {
			target = c
			if c.ws.owner == w.owner {
				break
			}
		}
	}
	r.mu.Unlock()
	if target == nil {
		return errNoTarget
	}
	f.target, f.scope = target.cid, scopeNone
	f.note = fmt.Sprintf("by %s, for a call to %s", w.id, target.ws.id)
	f.start = time.Now()
	return w.client.send(map[string]any{"cmd": "forge", "correlation_id": target.cid})
}
