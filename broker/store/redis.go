package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/tlsclient"
)

// RedisConfig configures NewRedis. Exactly one of URL and ClusterAddrs must
// be set: the same Redis as the brokers' bus.
type RedisConfig struct {
	// URL of a single Redis server (redis://, rediss://).
	URL string
	// ClusterAddrs are seed addresses of a Redis Cluster. Every key of the
	// store carries one hash tag, so all records live in one slot: one
	// shard serves the store.
	ClusterAddrs []string
	// TLS is the bus's RedisConfig.TLS: the trust and client certificate
	// of TLS connections (rediss://, or a cluster over TLS).
	TLS *tlsclient.Dialer
	// Prefix starts every key; bus.DefaultRedisPrefix when empty. It must
	// be Bus's prefix.
	Prefix string
	// Bus is this process's bus on the same Redis and prefix. The store
	// hears the outcomes told to it on it (one subscription to its own
	// outcome channel, for Watch), so that an instance keeps one pub/sub
	// connection. The store does not close it.
	Bus bus.Bus
	Options
	Logger zerolog.Logger
}

// OutcomeChannel starts the bus channels (under the prefix) on which the
// Redis store tells an instance the correlation ids of the calls that got
// their outcome and that it may wait for: those it recorded and those it
// read to wait for them (Redis.GetWatched). Each store has its own,
// OutcomeChannel + ":" + a random id of its own; an outcome is told to the
// few instances that may wait for it, not to every one. It carries the
// keys' hash tag, so that on a Cluster the scripts publish it (SPUBLISH)
// on the shard that holds the records.
const OutcomeChannel = "{calls}:done"

// Redis is the Store shared by broker instances on one Redis: a hash per
// call, a list per workspace for its queue, one sorted set of the times
// Sweep acts at, and a key per idempotency key; every step that must be
// atomic is a Lua script (lua/*.lua, run by redis_scripts.go). The
// scripts that write an outcome also tell it to the instances that may wait
// for it, each on its own outcome channel (see OutcomeChannel), for Watch.
//
// Commands are never retried by the client: a script whose reply was lost
// may have run, and running Create twice would answer the retry ErrExists.
// All methods are safe for concurrent use.
type Redis struct {
	client  redis.UniversalClient
	batch   *batcher // runs the scripts (redis_batch.go)
	opts    Options
	log     zerolog.Logger
	k       redisKeys
	publish string // the command the scripts announce outcomes with
	// id names this store among the instances on the Redis: a record's
	// origin, a watcher of a call, the end of its outcome channel.
	id     string
	single bool // one server: Create tells the holder in its script
	prefix string
	sub    bus.Subscription
	watch  watchers
	closed atomic.Bool
}

var _ Store = (*Redis)(nil)

// redisKeys names the store's keys. The "{calls}" hash tag keeps them in
// one cluster slot (a prefix with a tag of its own does the same).
type redisKeys struct {
	record   string // + correlation id: the call's hash
	queue    string // + workspace id: its list of queued correlation ids
	idem     string // + workspace id NUL key: the correlation id
	due      string // sorted set: correlation id by the unix ms Sweep acts at
	watchers string // + correlation id: the set of ids of the instances waiting for it
	channel  string // prefix + OutcomeChannel + ":", as the scripts publish it (an id ends it)
}

func newRedisKeys(prefix string) redisKeys {
	base := prefix + "{calls}:"
	return redisKeys{
		record:   base + "call:",
		queue:    base + "queue:",
		idem:     base + "idem:",
		due:      base + "due",
		watchers: base + "watchers:",
		channel:  prefix + OutcomeChannel + ":",
	}
}

// NewRedis connects to Redis and subscribes OutcomeChannel on cfg.Bus. It
// fails if Redis does not answer within ctx. Close releases it.
func NewRedis(ctx context.Context, cfg RedisConfig) (*Redis, error) {
	if (cfg.URL == "") == (len(cfg.ClusterAddrs) == 0) {
		return nil, errors.New("creating redis call store: set exactly one of URL and ClusterAddrs")
	}
	if cfg.Bus == nil {
		return nil, errors.New("creating redis call store: a bus is required (RedisConfig.Bus)")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = bus.DefaultRedisPrefix
	}
	cfg.Options.setDefaults()
	client, publish, err := bus.NewSideClient(cfg.URL, cfg.ClusterAddrs, cfg.TLS)
	if err != nil {
		return nil, err
	}
	r := &Redis{client: client, batch: &batcher{client: client}, opts: cfg.Options, log: cfg.Logger.With().Str("component", "store.redis").Logger(),
		k: newRedisKeys(cfg.Prefix), publish: publish, single: cfg.URL != "", prefix: cfg.Prefix, id: newStoreID()}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("connecting call store to redis: %w", err)
	}
	sub, err := cfg.Bus.Subscribe(ctx, OutcomeChannel+":"+r.id, func(msg []byte) { r.watch.notify(string(msg), Record{}) })
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("subscribing call outcomes: %w", err)
	}
	r.sub = sub
	return r, nil
}

// unavailable wraps a Redis failure.
func unavailable(doing string, err error) error {
	if errors.Is(err, redis.ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// Create implements Store. On a single server the script publishes the
// call on its workspace channel (the bus's name for it, under the prefix)
// and, when a holder heard it, records it delivered rather than queued:
// the holder delivers it as it comes, with no claim. On a Cluster that
// channel lives on another shard than the records: the call is queued and
// Told is -1.
func (r *Redis) Create(ctx context.Context, rec Record) (Created, error) {
	return r.create(ctx, rec, false)
}

// CreateDelivered implements Store: the create script records the call
// delivered when the workspace's queue is empty, on a single server and a
// Cluster alike, and publishes nothing.
func (r *Redis) CreateDelivered(ctx context.Context, rec Record) (Created, error) {
	return r.create(ctx, rec, true)
}

// create is Create, or CreateDelivered when delivered is set.
func (r *Redis) create(ctx context.Context, rec Record, delivered bool) (Created, error) {
	if r.closed.Load() {
		return Created{}, ErrClosed
	}
	rec, err := checkNew(rec)
	if err != nil {
		return Created{}, err
	}
	now := time.Now()
	a := createArgs{
		recordKey:    r.k.record + rec.CorrelationID,
		queueKey:     r.k.queue + rec.WorkspaceID,
		dueKey:       r.k.due,
		idemKey:      r.k.record + rec.CorrelationID, // none
		cid:          rec.CorrelationID,
		expireAt:     rec.Deadline.Add(r.opts.Grace + r.opts.Retention).UnixMilli(),
		dueQueued:    dueAt(&rec, r.opts.Grace).UnixMilli(),
		recordPrefix: r.k.record,
		hasIdem:      rec.IdempotencyKey != "",
		dueDelivered: rec.Deadline.Add(r.opts.Grace).UnixMilli(),
		now:          now.UnixMilli(),
		delivered:    delivered,
	}
	if a.hasIdem {
		a.idemKey = r.k.idem + idemScope(rec.WorkspaceID, rec.IdempotencyKey)
	}
	if !delivered && r.single {
		call := rec.Call()
		a.channel, a.message = r.prefix+protocol.WorkspaceChannel(rec.WorkspaceID), protocol.AppendBusMessage(nil, &protocol.BusMessage{ToolCall: call})
	}
	stored := rec
	if delivered { // unless calls are queued (the script then says queued)
		t := ms(now)
		stored.Status, stored.DeliveredAt = Delivered, &t
	}
	a.fields = r.fields(&stored, a.idemKey, a.hasIdem)
	res, err := a.run(ctx, r.batch).Slice()
	if err != nil {
		return Created{}, unavailable("recording call", err)
	}
	switch code, _ := res[0].(int64); code {
	case 0:
		told, _ := res[1].(int64)
		if told > 0 {
			t := ms(now)
			rec.Status, rec.DeliveredAt = Delivered, &t
		}
		r.watch.remember(rec, rec.Deadline.Add(r.opts.Grace))
		return Created{Record: rec, Told: int(told)}, nil
	case 1:
		existing, err := parseRecord(res[1])
		return Created{Record: existing, Existing: err == nil, Told: -1}, err
	case 3:
		t := ms(now)
		rec.Status, rec.DeliveredAt = Delivered, &t
		r.watch.remember(rec, rec.Deadline.Add(r.opts.Grace))
		return Created{Record: rec, Told: -1, Claimed: true}, nil
	}
	return Created{}, ErrExists
}

// Put implements Store.
func (r *Redis) Put(ctx context.Context, rec Record) (Record, error) {
	if r.closed.Load() {
		return Record{}, ErrClosed
	}
	rec, err := checkPut(rec)
	if err != nil {
		return Record{}, err
	}
	expire, due := rec.Deadline.Add(r.opts.Grace+r.opts.Retention).UnixMilli(), ""
	if rec.FinishedAt != nil {
		expire = rec.FinishedAt.Add(r.opts.Retention).UnixMilli()
	} else {
		due = strconv.FormatInt(dueAt(&rec, r.opts.Grace).UnixMilli(), 10)
	}
	a := putArgs{recordKey: r.k.record + rec.CorrelationID, dueKey: r.k.due, cid: rec.CorrelationID, expireAt: expire, due: due, fields: r.putFields(&rec)}
	n, err := a.run(ctx, r.batch).Int()
	switch {
	case err != nil:
		return Record{}, unavailable("recording call", err)
	case n == 0:
		return Record{}, ErrExists
	}
	if rec.FinishedAt == nil {
		r.watch.remember(rec, rec.Deadline.Add(r.opts.Grace))
	}
	return rec, nil
}

// GetWatched implements Store: the read also makes this instance a watcher
// of the call, in the same atomic step, so that whoever writes the outcome
// tells it. A plain Get does not: the outcome of a call this instance
// neither recorded nor read this way is not told to it.
func (r *Redis) GetWatched(ctx context.Context, cid string) (Record, error) {
	if r.closed.Load() {
		return Record{}, ErrClosed
	}
	a := watchArgs{recordKey: r.k.record + cid, watchersKey: r.k.watchers + cid, instance: r.id}
	res, err := a.run(ctx, r.batch).Slice()
	if err != nil {
		return Record{}, unavailable("reading call record", err)
	}
	if len(res) == 0 {
		return Record{}, ErrNotFound
	}
	return parseRecord(res)
}

// Get implements Store.
func (r *Redis) Get(ctx context.Context, cid string) (Record, error) {
	if r.closed.Load() {
		return Record{}, ErrClosed
	}
	m, err := r.client.HGetAll(ctx, r.k.record+cid).Result()
	if err != nil {
		return Record{}, unavailable("reading call record", err)
	}
	if len(m) == 0 {
		return Record{}, ErrNotFound
	}
	var rec Record
	for k, v := range m {
		if err := rec.setField(k, v); err != nil {
			return Record{}, err
		}
	}
	return rec, rec.complete()
}

// Claim implements Store.
func (r *Redis) Claim(ctx context.Context, ws string, now time.Time, max int) ([]Record, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	a := claimArgs{queueKey: r.k.queue + ws, dueKey: r.k.due, recordPrefix: r.k.record, now: now.UnixMilli(), max: max}
	res, err := a.run(ctx, r.batch).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("claiming queued calls", err)
	}
	out := make([]Record, 0, len(res))
	for _, v := range res {
		rec, err := parseRecord(v)
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Finish implements Store.
func (r *Redis) Finish(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (Outcome, error) {
	return r.end(ctx, cid, resp, now, false)
}

// Withdraw implements Store.
func (r *Redis) Withdraw(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time) (Outcome, error) {
	return r.end(ctx, cid, resp, now, true)
}

// end is Finish, or Withdraw when withdraw is set.
func (r *Redis) end(ctx context.Context, cid string, resp protocol.ToolResponse, now time.Time, withdraw bool) (Outcome, error) {
	if r.closed.Load() {
		return Outcome{}, ErrClosed
	}
	resp.CorrelationID = cid
	a := finishArgs{
		recordKey:     r.k.record + cid,
		dueKey:        r.k.due,
		watchersKey:   r.k.watchers + cid,
		cid:           cid,
		status:        StatusOf(&resp),
		now:           now.UnixMilli(),
		response:      protocol.AppendToolResponseVerbatim(nil, &resp),
		expireAt:      now.Add(r.opts.Retention).UnixMilli(),
		channelPrefix: r.k.channel,
		withdraw:      withdraw,
		publish:       r.publish,
		instance:      r.id,
	}
	res, err := a.run(ctx, r.batch).Slice()
	if err != nil {
		r.watch.notify(cid, Record{}) // it may have run: watchers read again
		return Outcome{}, unavailable("recording call outcome", err)
	}
	switch code, _ := res[0].(int64); code {
	case 1:
		was, _ := res[1].(string)
		rec, err := parseRecord(res[2])
		if err == nil {
			// This instance's watchers get the record now; the others that
			// may wait for it are told on their outcome channels.
			r.watch.notify(cid, rec)
		}
		return Outcome{Record: rec, Won: true, Was: was}, err
	case 2:
		rec, err := parseRecord(res[1])
		return Outcome{Record: rec}, err
	}
	return Outcome{}, ErrNotFound
}

// Sweep implements Store. Redis forgets records itself (their TTL).
func (r *Redis) Sweep(ctx context.Context, now time.Time, max int) (int, error) {
	if r.closed.Load() {
		return 0, ErrClosed
	}
	a := sweepArgs{
		dueKey:           r.k.due,
		recordPrefix:     r.k.record,
		now:              now.UnixMilli(),
		max:              max,
		expireAt:         now.Add(r.opts.Retention).UnixMilli(),
		channelPrefix:    r.k.channel,
		codeOffline:      protocol.CodeWorkspaceOffline,
		msgOffline:       msgOffline,
		codeTimeout:      protocol.CodeTimeout,
		msgQueuedTimeout: msgQueuedTimeout,
		msgLostOwner:     msgLostOwner,
		publish:          r.publish,
		watchersPrefix:   r.k.watchers,
	}
	n, err := a.run(ctx, r.batch).Int()
	if err != nil {
		return 0, unavailable("sweeping call deadlines", err)
	}
	return n, nil
}

// Watch implements Store.
func (r *Redis) Watch(cid string) (<-chan Record, func()) { return r.watch.add(cid) }

// Pending implements Store: the record of a call this instance created,
// as it created it, while it has heard of no outcome for it (from its own
// Finish or Withdraw, or on its outcome channel, where any other
// instance's Finish and every Sweep tell the call's origin) and the call's
// deadline plus grace has not passed. Its status may be behind (queued
// for a call claimed since), never its outcome: a Watch registered before
// Pending is called fires on the outcome. So a wait on the instance that
// took the submit needs no first read of the record, and no GetWatched.
// Should the outcome's notice be lost with the Redis connection, the
// waiter's periodic read sees it instead (as it does for any Watch).
func (r *Redis) Pending(cid string) (Record, bool) { return r.watch.known(cid, time.Now()) }

// Close implements Store: it ends the subscription and the client.
func (r *Redis) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.sub.Unsubscribe(ctx)
	if cerr := r.client.Close(); err == nil {
		err = cerr
	}
	return err
}

// newStoreID is a random id for a store instance (16 hex digits).
func newStoreID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
