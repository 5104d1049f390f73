package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

// run is one chaos run: the topology, the callers, the records of every
// call, the fault log, and the violations found.
type run struct {
	cfg   config
	id    string // prefix of every correlation id
	topo  *topology
	start time.Time

	http     []*caller.HTTP // one per broker, on one shared client
	httpTr   *http.Transport
	busRedis *bus.Redis
	bus      *caller.BusCaller
	spy      *redis.PubSub
	logf     *os.File // callers.log: the BusCaller's and its bus's log

	faults faultLog

	mu         sync.Mutex
	records    []record // by seq
	outcomes   []string // outcome names; records hold their index
	outcomeIdx map[string]uint16
	inflight   map[uint64]*call
	delivered  map[uint64]int16 // seq -> the client that reported the call
	again      map[uint64]int16 // seq -> the client that reported the call a second time
	cancels    map[uint64]bool  // seq -> a client reported its tool_cancel
	cancelled  chan struct{}    // a tool_cancel was reported (capacity 1: a wake-up, not a count)
	replies    map[uint64]uint8 // seq -> answers published to an inbox (the spy)
	violations []violation

	sent atomic.Int64
	// Async calls' requests tried again after a fault, keyed submits sent
	// again and answered by the call recorded, cancels sent.
	asyncRetries, asyncResubmits, asyncCancels atomic.Int64
}

// violation is one broken promise.
type violation struct {
	kind   string
	seq    uint64
	hasSeq bool
	detail string
	at     time.Time
}

func (r *run) violate(v violation) {
	r.mu.Lock()
	r.violations = append(r.violations, v)
	r.mu.Unlock()
}

func newRun(cfg config, topo *topology) *run {
	return &run{
		cfg:        cfg,
		id:         fmt.Sprintf("chaos%x", cfg.seed&0xffffff),
		topo:       topo,
		outcomes:   []string{outcomeOK},
		outcomeIdx: map[string]uint16{outcomeOK: 0},
		inflight:   map[uint64]*call{},
		delivered:  map[uint64]int16{},
		again:      map[uint64]int16{},
		cancels:    map[uint64]bool{},
		cancelled:  make(chan struct{}, 1),
		replies:    map[uint64]uint8{},
		faults:     faultLog{busy: map[string]bool{}},
	}
}

// connectCallers opens the callers: an HTTP caller per broker on one
// client, a BusCaller on a Redis connection of its own, and the spy, a
// pattern subscription to every caller inbox that counts the answers
// published for each call.
func (r *run) connectCallers(ctx context.Context) error {
	r.httpTr = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: r.cfg.workers, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	client := &http.Client{Transport: r.httpTr}
	for _, b := range r.topo.brokers {
		r.http = append(r.http, &caller.HTTP{BaseURL: b.url, Token: r.topo.caller, Client: client})
	}
	logf, err := os.Create(filepath.Join(r.topo.dir, "callers.log"))
	if err != nil {
		return err
	}
	r.logf = logf
	log := zerolog.New(logf).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	r.busRedis, err = bus.NewRedis(ctx, bus.RedisConfig{URL: r.topo.redis.URL(), Prefix: r.topo.prefix, InstanceID: "chaos-callers", Logger: log})
	if err != nil {
		return fmt.Errorf("connecting the Redis callers: %w", err)
	}
	r.bus, err = caller.NewBusCaller(ctx, r.busRedis, caller.BusCallerOptions{Logger: log})
	if err != nil {
		return fmt.Errorf("starting the BusCaller: %w", err)
	}
	opt, err := redis.ParseURL(r.topo.redis.URL())
	if err != nil {
		return err
	}
	spy := redis.NewClient(opt)
	r.spy = spy.PSubscribe(ctx, r.topo.prefix+"inbox:*")
	if _, err := r.spy.Receive(ctx); err != nil {
		return fmt.Errorf("subscribing the spy: %w", err)
	}
	go func() { // ends when the spy is closed
		defer spy.Close()
		for m := range r.spy.Channel(redis.WithChannelSize(4096)) {
			var resp protocol.ToolResponse
			if protocol.DecodeToolResponse([]byte(m.Payload), &resp) != nil {
				continue
			}
			if seq, ok := r.seqOf(resp.CorrelationID); ok {
				r.mu.Lock()
				r.replies[seq]++
				r.mu.Unlock()
			}
		}
	}()
	return nil
}

func (r *run) closeCallers() {
	if r.bus != nil {
		_ = r.bus.Close()
	}
	if r.busRedis != nil {
		_ = r.busRedis.Close()
	}
	if r.spy != nil {
		_ = r.spy.Close()
	}
	if r.httpTr != nil {
		r.httpTr.CloseIdleConnections()
	}
	if r.logf != nil { // after everything that logs to it
		_ = r.logf.Close()
	}
}

// onDelivered is told by the socket.io clients of every call they
// receive: no call may reach a client twice, or a client other than the
// one it was sent to (checked once the run is over).
func (r *run) onDelivered(cid string, ws int) {
	seq, ok := r.seqOf(cid)
	if !ok {
		r.violate(violation{kind: "foreign_call", detail: fmt.Sprintf("client %s received a call with correlation id %q, which no caller of the run sent", r.topo.spaces[ws].id, cid), at: time.Now()})
		return
	}
	r.mu.Lock()
	if _, twice := r.delivered[seq]; twice {
		r.again[seq] = int16(ws)
	} else {
		r.delivered[seq] = int16(ws)
	}
	r.mu.Unlock()
}

// onCancelled is told by the socket.io clients of every tool_cancel.
func (r *run) onCancelled(cid string) {
	if seq, ok := r.seqOf(cid); ok {
		r.mu.Lock()
		r.cancels[seq] = true
		r.mu.Unlock()
		select {
		case r.cancelled <- struct{}{}:
		default:
		}
	}
}

// callLoop sends calls from cfg.workers goroutines at up to cfg.rate per
// second until the duration or the call bound is reached.
func (r *run) callLoop() {
	tokens := make(chan struct{}, r.cfg.workers)
	var wg sync.WaitGroup
	for i := range r.cfg.workers {
		rng := rand.New(rand.NewPCG(r.cfg.seed, uint64(100+i)))
		wg.Go(func() {
			for range tokens {
				r.one(rng)
			}
		})
	}
	end := r.start.Add(r.cfg.duration)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	per := float64(r.cfg.rate) / 100
	credit := 0.0
	for now := range tick.C {
		if now.After(end) || (r.cfg.calls > 0 && r.sent.Load() >= r.cfg.calls) {
			break
		}
		credit += per
		for credit >= 1 && (r.cfg.calls == 0 || r.sent.Load() < r.cfg.calls) {
			credit--
			select {
			case tokens <- struct{}{}:
				r.sent.Add(1)
			default:
				// Every worker is busy (calls waiting out a fault): the
				// rate drops rather than a queue growing.
				credit = 0
			}
		}
	}
	close(tokens)
	wg.Wait()
}

// one plans, sends, judges and records one call.
func (r *run) one(rng *rand.Rand) {
	r.mu.Lock()
	seq := uint64(len(r.records))
	r.records = append(r.records, record{})
	r.mu.Unlock()
	c := r.plan(rng, seq)
	rec := record{ws: int16(c.ws.idx), entry: int8(c.entry), way: c.way, act: c.act, wait: c.wait, timeout: c.timeout}
	r.mu.Lock()
	r.inflight[seq] = c
	r.mu.Unlock()
	sent := time.Now()
	var outcome, bad string
	var done time.Time
	switch c.way {
	case wayMCP:
		outcome, bad = r.mcpCall(c)
		done = time.Now()
	case wayAsync:
		var note asyncNote
		outcome, bad, done, note = r.asyncCall(c)
		rec.flags = note.flags
		if !note.checked.IsZero() {
			rec.checked = note.checked.Sub(r.start)
		}
	default:
		outcome, bad = r.judge(c, r.send(c))
		done = time.Now()
	}
	rec.sent, rec.done, rec.finished = sent.Sub(r.start), done.Sub(r.start), true
	if bad != "" {
		r.violate(violation{kind: outcome, seq: seq, hasSeq: true, detail: bad, at: done})
	}
	r.mu.Lock()
	delete(r.inflight, seq)
	idx, ok := r.outcomeIdx[outcome]
	if !ok {
		idx = uint16(len(r.outcomes))
		r.outcomes = append(r.outcomes, outcome)
		r.outcomeIdx[outcome] = idx
	}
	rec.outcome = idx
	r.records[seq] = rec
	r.mu.Unlock()
}

// lateBound is how long past its deadline a call may be answered.
const lateBound = time.Second

// newTopology starts Redis, the brokers, the bridges (each behind its
// proxy) and the clients, and waits until every workspace is held.
func newTopology(cfg config, bin, dir, clientsDir string, redisSrv redisServer, events clientEvents) (*topology, error) {
	t := &topology{
		cfg: cfg, bin: bin, dir: dir, redis: redisSrv, clientsDir: clientsDir, events: events,
		secret:  fmt.Sprintf("chaos-secret-%d", cfg.seed),
		prefix:  fmt.Sprintf("chaos:%d:", cfg.seed),
		control: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil}},
	}
	var err error
	if t.caller, err = auth.IssueToken([]byte(t.secret), auth.RoleCaller, []string{auth.AnyWorkspace}, 24*time.Hour); err != nil {
		return nil, err
	}
	for i := range cfg.brokers {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		t.brokers = append(t.brokers, &brokerNode{t: t, idx: i, name: fmt.Sprintf("b%d", i), addr: addr, url: "http://" + addr})
	}
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, b := range t.brokers {
		wg.Go(func() {
			if err := b.start(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return t, errs[0]
	}
	n := cfg.bridges + cfg.clients
	for i := range n {
		w := &workspace{t: t, idx: i, owner: i % cfg.brokers, conns: &connLog{}}
		if i < cfg.bridges {
			w.id = fmt.Sprintf("br-%02d", i)
		} else {
			w.id = fmt.Sprintf("nc-%02d", i-cfg.bridges)
		}
		if w.token, err = auth.IssueToken([]byte(t.secret), auth.RoleBridge, []string{w.id}, 24*time.Hour); err != nil {
			return t, err
		}
		t.spaces = append(t.spaces, w)
		if i >= cfg.bridges {
			if w.client, err = w.startClient(t.brokers[w.owner], "client "+w.id); err != nil {
				return t, err
			}
			continue
		}
		w.root = filepath.Join(dir, "roots", w.id)
		if err := os.MkdirAll(w.root, 0o755); err != nil {
			return t, err
		}
		if err := os.WriteFile(filepath.Join(w.root, whoamiFile), []byte(whoami(w.id)+"\n"), 0o644); err != nil {
			return t, err
		}
		addr, err := freeAddr()
		if err != nil {
			return t, err
		}
		if w.proxy, err = newProxy(addr, t.brokers[w.owner].addr, func(at time.Time) { w.conns.add(at, false, "proxy saw the connection close") }); err != nil {
			return t, err
		}
		if err := w.startBridge(); err != nil {
			return t, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := t.waitHeld(ctx, time.Time{}, t.spaces...); err != nil {
		return t, fmt.Errorf("at start: %w", err)
	}
	return t, nil
}

// logExcerpt returns the lines of the processes' logs (and the callers')
// that mention cid, at most max of them.
func (t *topology) logExcerpt(cid string, max int) string {
	files, _ := filepath.Glob(filepath.Join(t.dir, "*.log"))
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.Contains(line, cid) {
				out = append(out, filepath.Base(f)+": "+line)
				if len(out) >= max {
					return strings.Join(out, "\n")
				}
			}
		}
	}
	if len(out) == 0 {
		return "(no log line mentions " + cid + ")"
	}
	return strings.Join(out, "\n")
}
