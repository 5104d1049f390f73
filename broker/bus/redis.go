package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/tuning"
	"github.com/tetherdev/tether/tlsclient"
)

// DefaultRedisPrefix is the channel prefix used when RedisConfig.Prefix is
// empty.
const DefaultRedisPrefix = "tether:"

// Defaults for RedisConfig.
const (
	DefaultRedisPingInterval = time.Second
	// redisDialTimeout bounds one attempt to open a pub/sub connection.
	redisDialTimeout = 5 * time.Second
)

// RedisConfig configures NewRedis. Exactly one of URL and ClusterAddrs must
// be set.
type RedisConfig struct {
	// URL of a single Redis server: redis://[user:password@]host:port[/db],
	// rediss:// for TLS.
	URL string
	// ClusterAddrs are host:port seed addresses of a Redis Cluster (Redis 7
	// or later; no password yet). The bus then uses sharded pub/sub
	// (SPUBLISH/SSUBSCRIBE): a message crosses only the shard that owns its
	// channel's slot.
	ClusterAddrs []string
	// TLS is the trust (CA) and client certificate of TLS connections to
	// Redis. With URL it serves a rediss:// URL (nil: the system's roots,
	// no client certificate) and is an error with redis://; with
	// ClusterAddrs, non-nil reaches every node of the cluster over TLS (its
	// tls-port, with tls-cluster yes). Whatever the dial timeout (the URL's
	// dial_timeout, 5 s by default), a TLS dial ends within it, and sooner,
	// with ErrRedisNotTLS, at a port that speaks plaintext.
	TLS *tlsclient.Dialer
	// Prefix is prepended to every channel name; DefaultRedisPrefix if
	// empty. Channels named "ping:…" under the prefix are used by the bus
	// itself (see PingInterval).
	Prefix string
	// InstanceID names this bus in its private ping channels and in the
	// Redis client name of its pub/sub connections (CLIENT LIST); random
	// if empty.
	InstanceID string
	// Logger receives connection lifecycle events and handler panics.
	Logger zerolog.Logger
	// PingInterval is how often every pub/sub connection publishes a
	// message to its own private channel through Redis, to prove that its
	// subscriptions are alive; DefaultRedisPingInterval if zero.
	PingInterval time.Duration
	// PingTimeout is how long a self-ping may take to come back before the
	// connection is considered dead: Ready fails and the connection is
	// replaced and resubscribed. 3×PingInterval if zero.
	PingTimeout time.Duration
	// OnReconnect, if set, is called each time a pub/sub connection that
	// had been live was lost, came back, and every subscription it carries
	// is confirmed by Redis again (not on the first connect). Messages
	// published to its channels meanwhile were lost; the broker uses this
	// to re-announce what it serves. It runs on a goroutine of its own and
	// may use the bus.
	OnReconnect func()
	// OnLost, if set, is called each time a pub/sub connection that had
	// been live is lost, on its receiving goroutine, after the handlers
	// were called for every message it read and before it subscribes again:
	// no message of its next generation reaches a handler before OnLost
	// returns (messages that still wait for a slow handler of theirs are
	// the exception: they are older and keep their order). What is
	// published while it is down is lost; OnReconnect follows once it is
	// back. The broker uses it to stop delivering a workspace's calls until
	// it has taken the workspace again (Broker.BusLost). It must not block.
	OnLost func()
}

// Redis is the Bus used when tether instances share Redis pub/sub.
//
// One pub/sub connection carries every subscription of the instance (one
// per shard on a cluster); a receive loop per connection reads it and calls
// the handlers itself, in arrival order. A handler that runs longer than
// handoff.DefaultAfter, 200 µs (it blocks, or waits for the bus), has the
// reading move to a new goroutine: it delays later messages of its own
// subscription, which wait for it in order, and the other channels of its
// connection by about those 200 µs. On a single server publishes go out on
// one more connection, written by the publishing goroutine and batched
// under load, their counts read back by a goroutine of their own (see
// pipe); on a cluster they use go-redis pipelines (see clusterPublisher).
//
// Receiver counts: Redis counts subscribed connections, and tether's routing
// relies on that count (0 means nobody serves a workspace). So that a count
// always equals the number of subscriptions — also for a caller publishing
// with plain PUBLISH — the k-th concurrent subscription of one channel in
// one instance is carried by the instance's k-th pub/sub connection. With
// one subscription per channel, the usual case, an instance holds a single
// connection; further ones are opened on demand and closed when idle.
//
// Subscribe returns once Redis has confirmed the subscription, and
// Unsubscribe once Redis has confirmed its end, so a Publish that follows
// either, from any instance, counts accordingly.
//
// After a lost connection the bus reconnects with backoff and resubscribes
// every channel; Ready fails until that is confirmed. A connection whose
// subscriptions died silently is detected by the self-ping (PingInterval)
// and replaced. On a cluster, when a slot moves to another node Redis ends
// its shard subscriptions; the bus then replaces that node's connection,
// re-reads the slot map and resubscribes each channel on its new node.
//
// All methods are safe for concurrent use. Handlers may call Subscribe and
// Unsubscribe, but not Close, which waits for the delivery goroutines.
// A handler that panics is recovered and the panic logged.
type Redis struct {
	log          zerolog.Logger
	prefix       string
	instance     string
	pingInterval time.Duration
	pingTimeout  time.Duration
	onReconnect  func()
	onLost       func()

	single  *redis.Client        // single-server mode
	cluster *redis.ClusterClient // cluster mode
	base    *redis.Options       // template for the dedicated pub/sub clients
	topo    *clusterTopology     // cluster mode: which node serves a channel
	pub     publisher            // a pipe on a single server, a clusterPublisher on a cluster

	mu      sync.Mutex
	conns   map[connKey]*psConn
	changed chan struct{} // closed and replaced on every subscription state change
	closed  bool

	isClosed atomic.Bool // read by Publish without taking mu
	done     chan struct{}
	wg       sync.WaitGroup // every goroutine the bus starts
}

var (
	_ Bus     = (*Redis)(nil)
	_ Checker = (*Redis)(nil)
)

// NewRedis connects to Redis (or a Redis Cluster) and returns a bus. It
// fails if Redis does not answer within ctx. In single-server mode it also
// waits, within ctx, until its pub/sub connection is live, so a fresh bus
// is Ready. Close the bus to release its connections and goroutines.
func NewRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	if (cfg.URL == "") == (len(cfg.ClusterAddrs) == 0) {
		return nil, errors.New("creating redis bus: set exactly one of URL and ClusterAddrs")
	}
	r := &Redis{
		log:          cfg.Logger.With().Str("component", "bus.redis").Logger(),
		prefix:       cfg.Prefix,
		instance:     cfg.InstanceID,
		pingInterval: cfg.PingInterval,
		pingTimeout:  cfg.PingTimeout,
		onReconnect:  cfg.OnReconnect,
		onLost:       cfg.OnLost,
		conns:        make(map[connKey]*psConn),
		changed:      make(chan struct{}),
		done:         make(chan struct{}),
	}
	if r.prefix == "" {
		r.prefix = DefaultRedisPrefix
	}
	if r.instance == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		r.instance = hex.EncodeToString(b[:])
	}
	if r.pingInterval <= 0 {
		r.pingInterval = DefaultRedisPingInterval
	}
	if r.pingTimeout <= 0 {
		r.pingTimeout = 3 * r.pingInterval
	}

	if cfg.URL != "" {
		opts, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("parsing redis URL: %w", err)
		}
		opts.ContextTimeoutEnabled = true // a Publish honours its ctx
		if opts.Protocol == 0 {
			// RESP2 unless the URL asks (?protocol=3): with RESP3 go-redis
			// looks for push notifications before and after every command
			// and message, work the bus never needs.
			opts.Protocol = 2
		}
		if opts.MaxRetries == 0 {
			opts.MaxRetries = -1 // the bus resends nothing by itself (see publisher)
		}
		if err := redisTLS(opts, cfg.TLS); err != nil {
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		RawDial(opts)
		r.base = opts
		r.single = redis.NewClient(cloneOptions(opts))
		if err := r.single.Ping(ctx).Err(); err != nil {
			_ = r.single.Close()
			return nil, fmt.Errorf("connecting to redis at %s: %w", opts.Addr, explainRedisError(err, opts.Addr, opts.TLSConfig != nil))
		}
		if tuning.On(tuning.RedisPipe) {
			r.pub = newPipe(cloneOptions(r.base), r.prefix, clientName(r.prefix+"pub:"+r.instance), &r.wg)
		} else {
			r.pub = &clusterPublisher{client: r.single, command: "publish", prefix: r.prefix, wg: &r.wg}
		}
	} else {
		copts := &redis.ClusterOptions{
			Addrs:                 cfg.ClusterAddrs,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1, // see publisher
		}
		r.base = &redis.Options{}
		clusterTLS(copts, r.base, cfg.TLS)
		RawDialCluster(copts)
		r.cluster = redis.NewClusterClient(copts)
		RawDial(r.base)
		r.topo = &clusterTopology{client: r.cluster, tls: cfg.TLS != nil}
		if err := r.topo.refresh(ctx); err != nil {
			_ = r.cluster.Close()
			return nil, fmt.Errorf("connecting to redis cluster at %v: %w", cfg.ClusterAddrs, explainRedisError(err, cfg.ClusterAddrs[0], cfg.TLS != nil))
		}
		r.pub = &clusterPublisher{client: r.cluster, command: "spublish", prefix: r.prefix, wg: &r.wg}
	}

	r.wg.Add(1)
	go r.pingLoop()

	if r.single != nil {
		// The first connection is permanent: it carries the instance's
		// subscriptions and, with none, still proves Redis is reachable.
		r.mu.Lock()
		c := r.newConnLocked(connKey{})
		r.mu.Unlock()
		if err := r.waitLive(ctx, c); err != nil {
			_ = r.Close()
			return nil, fmt.Errorf("opening redis pub/sub connection: %w", err)
		}
	}
	return r, nil
}

// Instance returns the instance ID (RedisConfig.InstanceID or the random
// one chosen by NewRedis).
func (r *Redis) Instance() string { return r.instance }

func (r *Redis) waitLive(ctx context.Context, c *psConn) error {
	for {
		r.mu.Lock()
		live, changed := c.live, r.changed
		r.mu.Unlock()
		if live {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Publish implements Bus. The count is what Redis reports: the number of
// subscriptions, in every instance, the message reached (on a cluster: on
// the shard that owns the channel).
//
// A failed publish is retried only when Redis cannot have run it; when its
// reply is lost it may have been delivered, and a retry could deliver a
// call twice, so the error is returned instead (see publisher for the
// rule).
func (r *Redis) Publish(ctx context.Context, channel string, msg []byte) (int, error) {
	if r.isClosed.Load() {
		return 0, ErrClosed
	}
	n, err := r.pub.publish(ctx, channel, msg)
	if err != nil {
		return 0, r.publishError(channel, err)
	}
	return n, nil
}

// PublishAsync implements Bus. On a single server the command is written at
// once (or with the next batch) and the count comes from the connection's
// reader; on a cluster it is queued for a goroutine of the bus, which sends
// the queue one pipeline at a time (see clusterPublisher). The retry rule is
// Publish's.
func (r *Redis) PublishAsync(channel string, msg []byte, done func(int, error)) {
	if r.isClosed.Load() {
		done(0, ErrClosed)
		return
	}
	r.pub.publishAsync(channel, msg, func(n int, err error) {
		if err != nil {
			err = r.publishError(channel, err)
		}
		done(n, err)
	})
}

func (r *Redis) publishError(channel string, err error) error {
	if (errors.Is(err, redis.ErrClosed) || errors.Is(err, ErrClosed)) && r.isClosed.Load() {
		return ErrClosed
	}
	return fmt.Errorf("publishing to redis channel %q: %w", channel, err)
}

// Close implements Bus. It ends every subscription without waiting for
// Redis, stops every goroutine of the bus and closes its connections. It
// must not be called from a Handler.
func (r *Redis) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.isClosed.Store(true)
	conns := make([]*psConn, 0, len(r.conns))
	for key, c := range r.conns {
		for _, e := range c.entries {
			if e.sub != nil {
				e.sub.done.Store(true)
			}
		}
		conns = append(conns, c)
		delete(r.conns, key)
	}
	r.broadcastLocked()
	r.mu.Unlock()

	close(r.done)
	for _, c := range conns {
		c.shutdown()
	}
	r.pub.close()
	r.wg.Wait()

	var err error
	if r.single != nil {
		err = r.single.Close()
	} else {
		err = r.cluster.Close()
	}
	if err != nil {
		return fmt.Errorf("closing redis client: %w", err)
	}
	return nil
}

// broadcastLocked wakes everybody waiting for a subscription state change.
func (r *Redis) broadcastLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// cloneOptions returns a copy of o that a client may own (NewClient
// modifies the options it is given).
func cloneOptions(o *redis.Options) *redis.Options {
	c := *o
	return &c
}
