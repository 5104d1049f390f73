package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/broker/store/storetest"
)

var prefixSeq atomic.Int64

// uniquePrefix isolates a test on a shared server.
func uniquePrefix(t *testing.T) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test:%s:%d:%d:", name, time.Now().UnixNano(), prefixSeq.Add(1))
}

// newRedis returns a store on a bus of its own (like one broker instance),
// both closed in t.Cleanup.
func newRedis(t *testing.T, cfg store.RedisConfig) *store.Redis {
	t.Helper()
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.NewRedis(ctx, bus.RedisConfig{URL: cfg.URL, ClusterAddrs: cfg.ClusterAddrs, Prefix: cfg.Prefix, Logger: cfg.Logger})
	if err != nil {
		t.Fatalf("bus.NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	cfg.Bus = b
	s, err := store.NewRedis(ctx, cfg)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Run(t, func(t *testing.T, opts store.Options) (store.Store, store.Store) {
		// Two instances on one server and prefix, like two brokers.
		cfg := store.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix(t), Options: opts}
		return newRedis(t, cfg), newRedis(t, cfg)
	})
}

func TestRedisClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3)
	storetest.Run(t, func(t *testing.T, opts store.Options) (store.Store, store.Store) {
		cfg := store.RedisConfig{ClusterAddrs: cl.Addrs(), Prefix: uniquePrefix(t), Options: opts}
		return newRedis(t, cfg), newRedis(t, cfg)
	})
}

func TestRedisConfigIsChecked(t *testing.T) {
	for _, cfg := range []store.RedisConfig{{}, {URL: "redis://x", ClusterAddrs: []string{"y"}}, {URL: "::not a url", Bus: bus.NewMemory()}, {URL: "redis://127.0.0.1:1"}} {
		if s, err := store.NewRedis(context.Background(), cfg); err == nil {
			_ = s.Close()
			t.Errorf("NewRedis(%+v) accepted", cfg)
		}
	}
}
