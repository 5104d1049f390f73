package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/caller"
)

// redisEnv is one Redis (a server or a cluster) with a channel prefix of the
// test's own, and the brokers started on it.
type redisEnv struct {
	t       *testing.T
	srv     *redistest.Server  // single server
	cluster *redistest.Cluster // or a cluster
	prefix  string
	// tlsFlags are the broker flags of a TLS Redis's trust and client
	// certificate (newTLSRedisEnv).
	tlsFlags []string
}

var prefixSeq atomic.Int64

func redisPrefix(t *testing.T) string {
	return fmt.Sprintf("e2e:%s:%d:%d:", t.Name(), time.Now().UnixNano(), prefixSeq.Add(1))
}

// newRedisEnv starts a redis-server for the test.
func newRedisEnv(t *testing.T) *redisEnv {
	t.Helper()
	return &redisEnv{t: t, srv: redistest.Start(t), prefix: redisPrefix(t)}
}

// newClusterEnv starts a three-master Redis Cluster for the test.
func newClusterEnv(t *testing.T) *redisEnv {
	t.Helper()
	return &redisEnv{t: t, cluster: redistest.StartCluster(t, 3), prefix: redisPrefix(t)}
}

// flags are the broker flags that put it on this Redis.
func (e *redisEnv) flags() []string {
	if e.cluster != nil {
		seeds := e.cluster.Addrs()
		if e.tlsFlags != nil {
			for i, a := range seeds {
				seeds[i] = "rediss://" + a
			}
		}
		return append([]string{"--redis-cluster", strings.Join(seeds, ","), "--redis-prefix", e.prefix}, e.tlsFlags...)
	}
	return append([]string{"--redis", e.srv.URL(), "--redis-prefix", e.prefix}, e.tlsFlags...)
}

// broker starts `tether broker` on this Redis, named name (its instance id).
func (e *redisEnv) broker(name string, extra ...string) *brokerProc {
	e.t.Helper()
	args := append(append([]string{"--instance-id", name}, e.flags()...), extra...)
	return startNamedBroker(e.t, "broker "+name, nil, args...)
}

// startNamedBroker runs `tether broker` on a free loopback port with env
// added to its environment.
func startNamedBroker(t *testing.T, name string, env []string, extra ...string) *brokerProc {
	t.Helper()
	return runBroker(t, name, "127.0.0.1:0", env, extra...)
}

// busCaller is a Go backend worker calling over Redis: caller.BusCaller on
// its own bus.Redis, both closed in t.Cleanup.
func (e *redisEnv) busCaller() *caller.BusCaller {
	e.t.Helper()
	return e.newBusCaller(e.workerBus(), caller.BusCallerOptions{})
}

// workerBus opens a bus.Redis on this Redis and prefix, closed in
// t.Cleanup.
func (e *redisEnv) workerBus() *bus.Redis {
	e.t.Helper()
	cfg := bus.RedisConfig{Prefix: e.prefix, InstanceID: "worker", Logger: e.logger()}
	cfg.URL, cfg.ClusterAddrs = e.addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rb, err := bus.NewRedis(ctx, cfg)
	if err != nil {
		e.t.Fatalf("NewRedis: %v", err)
	}
	e.t.Cleanup(func() { _ = rb.Close() })
	return rb
}

// addrs is where this Redis is: a server's URL, or a cluster's seeds.
func (e *redisEnv) addrs() (url string, cluster []string) {
	if e.cluster != nil {
		return "", e.cluster.Addrs()
	}
	return e.srv.URL(), nil
}

func (e *redisEnv) logger() zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(e.t)).Level(zerolog.WarnLevel)
}

// newBusCaller is a caller.BusCaller on rb, closed in t.Cleanup (before
// what was opened for it earlier).
func (e *redisEnv) newBusCaller(rb *bus.Redis, opts caller.BusCallerOptions) *caller.BusCaller {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts.Logger = e.logger()
	c, err := caller.NewBusCaller(ctx, rb, opts)
	if err != nil {
		e.t.Fatalf("NewBusCaller: %v", err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// readyz returns the HTTP status of GET /readyz (0 if unreachable).
func (b *brokerProc) readyz() int {
	res, err := http.Get(b.url + "/readyz")
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// metric returns the value of an unlabelled metric on /metrics.
func (b *brokerProc) metric(name string) float64 {
	b.t.Helper()
	res, err := http.Get(b.url + "/metrics")
	if err != nil {
		b.t.Fatalf("%s: reading metrics: %v", b.name, err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.t.Fatalf("%s: metric %s = %q", b.name, name, v)
			}
			return f
		}
	}
	b.t.Fatalf("%s: no metric %s", b.name, name)
	return 0
}

// drainEvents returns the events the client reported so far without
// waiting for more.
func (c *ideClient) drainEvents() []map[string]any {
	var out []map[string]any
	for {
		select {
		case ev := <-c.events:
			out = append(out, ev)
		default:
			return out
		}
	}
}
