package bus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// liveMarker is the payload of the PING that follows a (re)subscription
// batch: its reply means Redis has processed every SUBSCRIBE before it.
const liveMarker = "tether-bus-live"

// subscribeChunk bounds the channels of one (S)SUBSCRIBE command.
const subscribeChunk = 512

// errDialRefused is what a pub/sub client's dialer returns outside the one
// dial a connection attempt allows (see psConn.gate).
var errDialRefused = errors.New("redis bus: pub/sub redial is left to the bus")

// connKey names one pub/sub connection: the node it talks to ("" for the
// single server) and its index among the instance's connections to that
// node (see Redis on receiver counts).
type connKey struct {
	addr string
	k    int
}

func (k connKey) String() string {
	if k.addr == "" {
		return "#" + strconv.Itoa(k.k)
	}
	return k.addr + "#" + strconv.Itoa(k.k)
}

// entry is one channel on one pub/sub connection. All fields are guarded by
// Redis.mu.
type entry struct {
	channel string    // with prefix
	sub     *redisSub // the subscription served; nil while it is being ended
	// ending is the subscription being ended: messages Redis delivers
	// until it confirms the end were counted for it and are still handled.
	ending *redisSub
	conn   *psConn

	gen           uint64 // conn generation the last SUBSCRIBE was sent on
	pending       int    // commands sent on the current generation, not yet confirmed
	subscribed    bool   // Redis confirmed the subscription on the current generation
	everConfirmed bool   // Redis confirmed the subscription once: Subscribe returned
	deleted       bool   // removed from its connection for good
}

// psConn is one pub/sub connection, replaced by a new generation (a fresh
// go-redis PubSub on a fresh socket) whenever it fails. Its goroutine, run,
// connects and then reads, calling the handlers as messages arrive; a
// handler still running after handoff.DefaultAfter has the reading move to a
// new goroutine (see receive).
//
// Lock order: sendMu, then Redis.mu. sendMu is held across a write on the
// PubSub (bounded by the write timeout) so that the state change and the
// command implementing it reach Redis in the same order for every channel.
type psConn struct {
	r       *Redis
	key     connKey
	client  *redis.Client // dedicated to this connection
	sharded bool
	gate    atomic.Bool // allows the dialer one dial (see connect)
	ctx     context.Context
	cancel  context.CancelFunc
	stop    chan struct{} // closed by shutdown

	sendMu sync.Mutex

	// Guarded by Redis.mu.
	ps          *redis.PubSub // current generation; nil while down
	gen         uint64
	live        bool // the current generation confirmed every subscription
	everLive    bool
	pingChannel string
	pingSince   time.Time // oldest self-ping not yet delivered
	genSince    time.Time // when the current generation was opened
	downSince   time.Time // when the last live generation was lost
	entries     map[string]*entry
	emptySince  time.Time
	stopped     bool
}

// newConnLocked creates the connection for key and starts its goroutines.
func (r *Redis) newConnLocked(key connKey) *psConn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &psConn{
		r:       r,
		key:     key,
		sharded: r.cluster != nil,
		ctx:     ctx,
		cancel:  cancel,
		stop:    make(chan struct{}),
		entries: make(map[string]*entry),
	}
	opts := cloneOptions(r.base)
	if key.addr != "" {
		opts.Addr = key.addr
	}
	opts.ClientName = clientName(r.prefix + "bus:" + r.instance)
	opts.ContextTimeoutEnabled = true
	opts.MaxRetries = -1 // the bus retries, with a fresh connection
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = redisDialTimeout
	}
	dial := opts.Dialer
	if dial == nil {
		dial = redis.NewDialer(opts)
	}
	// go-redis's PubSub redials by itself after an error and resubscribes
	// what it remembers. The bus instead replaces the whole PubSub, so that
	// it knows exactly which socket a confirmation came from: a dial is
	// allowed only while connect holds the gate open.
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !c.gate.CompareAndSwap(true, false) {
			return nil, errDialRefused
		}
		return dial(ctx, network, addr)
	}
	c.client = redis.NewClient(opts)
	r.conns[key] = c
	r.wg.Add(1)
	go c.run()
	return c
}

// clientName makes s acceptable to CLIENT SETNAME, which refuses spaces
// and newlines.
func clientName(s string) string {
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, s)
}

// retirable reports whether the connection may be closed once it carries
// nothing: every one but the single server's first, which proves Redis
// reachable even without subscriptions.
func (c *psConn) retirable() bool { return c.sharded || c.key.k > 0 }

// holdsLocked reports whether Ready depends on c: it is the single
// server's permanent connection, or it carries a subscription that Redis
// confirmed before. A connection opened for a Subscribe still in progress
// does not count.
func (c *psConn) holdsLocked() bool {
	if !c.retirable() || c.everLive {
		return true
	}
	for _, e := range c.entries {
		if e.everConfirmed {
			return true
		}
	}
	return false
}

func (c *psConn) addLocked(e *entry) {
	e.conn = c
	e.gen, e.pending, e.subscribed = 0, 0, false
	c.entries[e.channel] = e
	c.emptySince = time.Time{}
}

// removeLocked deletes e from its connection for good and wakes its waiters.
func (c *psConn) removeLocked(e *entry) {
	if c.entries[e.channel] == e {
		delete(c.entries, e.channel)
	}
	e.deleted = true
	if len(c.entries) == 0 {
		c.emptySince = time.Now()
	}
	c.r.broadcastLocked()
}

// shutdown stops the connection's goroutines and closes its socket; it
// returns at once.
func (c *psConn) shutdown() {
	c.r.mu.Lock()
	if c.stopped {
		c.r.mu.Unlock()
		return
	}
	c.stopped = true
	close(c.stop)
	ps := c.ps
	c.r.mu.Unlock()
	c.cancel()
	if ps != nil {
		_ = ps.Close()
	}
}

// kill closes the current socket; run then starts a new generation.
func (c *psConn) kill() {
	c.r.mu.Lock()
	ps := c.ps
	c.r.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}

// run connects, reads until the connection fails, and starts over, until
// shutdown.
func (c *psConn) run() {
	defer c.r.wg.Done()
	defer c.client.Close()
	log := c.r.log.With().Stringer("conn", c.key).Logger()
	failures := 0
	for {
		ps, err := c.connect()
		if err != nil {
			if errors.Is(err, errStopped) {
				return
			}
			failures++
			ev := log.Debug()
			if failures%10 == 1 {
				ev = log.Warn()
			}
			ev.Err(err).Int("attempt", failures).Msg("connecting redis pub/sub failed")
			if !c.sleep(backoff(failures)) {
				return
			}
			continue
		}
		started := time.Now()
		err = c.receive(ps)
		stopped, everLive := c.down(ps)
		if stopped {
			return
		}
		log.Warn().Err(err).Dur("after", time.Since(started).Round(time.Millisecond)).
			Msg("redis pub/sub connection lost; resubscribing")
		if everLive && c.r.onLost != nil {
			// Before the next generation subscribes: its messages come
			// after what the hook sets up (see RedisConfig.OnLost).
			c.r.onLost()
		}
		// A connection that fails right after connecting counts as a
		// failed attempt, so a persistent fault backs off.
		if time.Since(started) < 2*c.r.pingTimeout {
			failures++
			if !c.sleep(backoff(failures)) {
				return
			}
		} else {
			failures = 0
		}
	}
}

var errStopped = errors.New("pub/sub connection stopped")

func backoff(failures int) time.Duration {
	d := 25 * time.Millisecond << min(failures, 6)
	return min(d, time.Second)
}

func (c *psConn) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.stop:
		return false
	}
}

// connect opens a new generation: a socket subscribed to the private ping
// channel, then every channel the connection carries, then a PING whose
// reply (seen by receive) marks the generation live.
func (c *psConn) connect() (*redis.PubSub, error) {
	r := c.r
	ctx, cancel := context.WithTimeout(c.ctx, redisDialTimeout)
	defer cancel()
	var moved []*entry
	if r.topo != nil {
		// The cluster may have moved slots: re-read it and send away the
		// channels this node no longer serves.
		if err := r.topo.refresh(ctx); err != nil {
			return nil, err
		}
		r.mu.Lock()
		moved = c.rehomeLocked()
		r.mu.Unlock()
		for _, e := range moved {
			r.sendSubscribe(e)
		}
	}
	pingChannel, err := r.pingChannelFor(c.key)
	if err != nil {
		return nil, err
	}

	var ps *redis.PubSub
	if c.sharded {
		ps = c.client.SSubscribe(ctx)
	} else {
		ps = c.client.Subscribe(ctx)
	}
	c.gate.Store(true)
	err = c.subscribeCmd(ctx, ps, pingChannel)
	c.gate.Store(false)
	if err != nil {
		_ = ps.Close()
		select {
		case <-c.stop:
			return nil, errStopped
		default:
		}
		return nil, fmt.Errorf("subscribing ping channel: %w", explainRedisError(err, c.client.Options().Addr, c.client.Options().TLSConfig != nil))
	}

	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	r.mu.Lock()
	if c.stopped {
		r.mu.Unlock()
		_ = ps.Close()
		return nil, errStopped
	}
	c.gen++
	c.ps = ps
	c.genSince = time.Now()
	c.pingChannel = pingChannel
	c.pingSince = time.Time{}
	batch := make([]string, 0, len(c.entries))
	for _, e := range c.entries {
		if e.sub == nil { // cannot happen: down removed them
			continue
		}
		e.gen, e.pending, e.subscribed = c.gen, 1, false
		batch = append(batch, e.channel)
	}
	r.mu.Unlock()

	// A failed write closes the socket; receive then reports it.
	for _, group := range c.groups(batch) {
		for chunk := range slices.Chunk(group, subscribeChunk) {
			if err := c.subscribeCmd(ctx, ps, chunk...); err != nil {
				return ps, nil
			}
		}
	}
	_ = ps.Ping(ctx, liveMarker)
	return ps, nil
}

// groups splits channels into sets one (S)SUBSCRIBE may carry: all of them
// for a single server, one set per slot on a cluster.
func (c *psConn) groups(channels []string) [][]string {
	if !c.sharded || len(channels) == 0 {
		return [][]string{channels}
	}
	bySlot := map[uint16][]string{}
	for _, ch := range channels {
		s := slot(ch)
		bySlot[s] = append(bySlot[s], ch)
	}
	groups := make([][]string, 0, len(bySlot))
	for _, g := range bySlot {
		groups = append(groups, g)
	}
	return groups
}

func (c *psConn) subscribeCmd(ctx context.Context, ps *redis.PubSub, channels ...string) error {
	if c.sharded {
		return ps.SSubscribe(ctx, channels...)
	}
	return ps.Subscribe(ctx, channels...)
}

func (c *psConn) unsubscribeCmd(ctx context.Context, ps *redis.PubSub, channels ...string) error {
	if c.sharded {
		return ps.SUnsubscribe(ctx, channels...)
	}
	return ps.Unsubscribe(ctx, channels...)
}

// down ends the generation of ps: subscriptions being ended are done (the
// socket that carried them is gone), the others wait for the next
// generation. It reports whether the connection was shut down.
func (c *psConn) down(ps *redis.PubSub) (stopped, everLive bool) {
	r := c.r
	c.sendMu.Lock()
	r.mu.Lock()
	everLive = c.everLive
	c.ps = nil
	if c.live {
		c.downSince = time.Now()
	}
	c.live = false
	for _, e := range c.entries {
		e.pending, e.subscribed = 0, false
		if e.sub == nil {
			c.removeLocked(e)
		}
	}
	r.broadcastLocked()
	stopped = c.stopped
	r.mu.Unlock()
	c.sendMu.Unlock()
	_ = ps.Close()
	return stopped, everLive
}
