package revoke

import (
	"context"
	_ "embed" // the script's source
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/tlsclient"
)

// RedisConfig configures NewShared: the Redis and prefix of the brokers'
// bus. Exactly one of URL and ClusterAddrs is set.
type RedisConfig struct {
	URL          string   // a single Redis server (redis://, rediss://)
	ClusterAddrs []string // or the seeds of a Redis Cluster
	// TLS is the bus's RedisConfig.TLS (rediss://, a cluster over TLS).
	TLS *tlsclient.Dialer
	// Prefix starts the key and the channel; bus.DefaultRedisPrefix when
	// empty. It must be Bus's prefix.
	Prefix string
	// Bus is this process's bus on the same Redis and prefix: the list
	// hears new entries on it. The list does not close it.
	Bus bus.Bus
}

// Channel is the bus channel (under the prefix) on which each new entry is
// told, as its JSON. It carries the key's hash tag, so that on a Cluster
// the add script publishes it (SPUBLISH) on the shard that holds the key.
const Channel = "{revocations}:told"

// Key is the sorted set (under the prefix) of the entries, as JSON, scored
// by the unix ms each ends; it expires with its last entry.
const Key = "{revocations}"

var (
	//go:embed lua/add.lua
	addLua    string
	addScript = redis.NewScript(addLua)
)

// redisShared keeps the list of the brokers on one Redis.
type redisShared struct {
	client  redis.UniversalClient
	key     string
	channel string // as the script publishes it: prefix + Channel
	publish string
	sub     bus.Subscription
}

// NewShared returns the list of the brokers on cfg's Redis: it subscribes
// Channel on cfg.Bus, then loads the entries in effect, so that none made
// in between is missed. It fails when Redis does not answer within ctx.
// Close releases it (not the bus).
func NewShared(ctx context.Context, opts Options, cfg RedisConfig) (*List, error) {
	if (cfg.URL == "") == (len(cfg.ClusterAddrs) == 0) {
		return nil, errors.New("creating redis revocation list: set exactly one of URL and ClusterAddrs")
	}
	if cfg.Bus == nil {
		return nil, errors.New("creating redis revocation list: a bus is required (RedisConfig.Bus)")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = bus.DefaultRedisPrefix
	}
	client, publish, err := bus.NewSideClient(cfg.URL, cfg.ClusterAddrs, cfg.TLS)
	if err != nil {
		return nil, err
	}
	r := &redisShared{key: cfg.Prefix + Key, channel: cfg.Prefix + Channel, publish: publish, client: client}
	l := New(opts)
	l.shared = r
	sub, err := cfg.Bus.Subscribe(ctx, Channel, func(msg []byte) {
		e, err := decodeTold(msg)
		if err != nil {
			l.log.Warn().Err(err).Msg("unusable message on the revocations channel ignored")
			return
		}
		l.apply(e)
	})
	if err != nil {
		_ = r.client.Close()
		return nil, fmt.Errorf("subscribing revocations: %w", err)
	}
	r.sub = sub
	entries, err := r.load(ctx)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	l.apply(entries...)
	return l, nil
}

// decodeTold reads an entry from Redis (the set or the channel): written by
// a broker, but checked as any outside input is, since Redis is shared.
func decodeTold(msg []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(msg, &e); err != nil {
		return Entry{}, fmt.Errorf("decoding revocation: %w", err)
	}
	if (e.JTI == "") == (e.WorkspaceID == "" || e.IssuedBefore == nil) || e.ExpiresAt.IsZero() {
		return Entry{}, errors.New("decoding revocation: neither a jti nor a workspace entry")
	}
	return e, nil
}

func (r *redisShared) add(ctx context.Context, e Entry) error {
	msg, err := json.Marshal(e)
	if err != nil {
		return err
	}
	// Unix ms as decimal strings: Lua's number formatting would lose digits.
	argv := []any{msg, strconv.FormatInt(e.ExpiresAt.UnixMilli(), 10), strconv.FormatInt(time.Now().UnixMilli(), 10), r.publish, r.channel}
	if err := addScript.Run(ctx, r.client, []string{r.key}, argv...).Err(); err != nil {
		return fmt.Errorf("adding revocation: %w", err)
	}
	return nil
}

func (r *redisShared) load(ctx context.Context) ([]Entry, error) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	members, err := r.client.ZRangeByScore(ctx, r.key, &redis.ZRangeBy{Min: now, Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("loading revocations: %w", err)
	}
	entries := make([]Entry, 0, len(members))
	for _, m := range members {
		e, err := decodeTold([]byte(m))
		if err != nil {
			continue // not one of ours: a shared Redis; never fatal
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func (r *redisShared) close(ctx context.Context) error {
	err := r.sub.Unsubscribe(ctx)
	return errors.Join(err, r.client.Close())
}
