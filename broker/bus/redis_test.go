package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/bustest"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recoveryWait bounds every wait for the bus to notice an outage or to
// recover from one.
const recoveryWait = 15 * time.Second

var prefixSeq atomic.Int64

// uniquePrefix isolates a test on a shared server.
func uniquePrefix(t *testing.T) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test:%s:%d:%d:", name, time.Now().UnixNano(), prefixSeq.Add(1))
}

// newRedis returns a bus closed in t.Cleanup.
func newRedis(t *testing.T, cfg bus.RedisConfig) *bus.Redis {
	t.Helper()
	if cfg.Prefix == "" {
		t.Fatal("newRedis: every test needs its own prefix")
	}
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.NewRedis(ctx, cfg)
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func TestRedisConformance(t *testing.T) {
	srv := redistest.Start(t)
	bustest.Run(t, func(t *testing.T) (bus.Bus, bus.Bus) {
		// Two instances on one server and prefix, like two brokers.
		cfg := bus.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix(t)}
		return newRedis(t, cfg), newRedis(t, cfg)
	})
}

func TestRedisClusterConformance(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	bustest.Run(t, func(t *testing.T) (bus.Bus, bus.Bus) {
		cfg := bus.RedisConfig{ClusterAddrs: cluster.Addrs(), Prefix: uniquePrefix(t)}
		return newRedis(t, cfg), newRedis(t, cfg)
	})
}

// TestRedisClusterUsesShardedPubSub checks that a subscription lives on the
// node owning the channel's slot, as a shard channel, so a message crosses
// one shard only.
func TestRedisClusterUsesShardedPubSub(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	prefix := uniquePrefix(t)
	b := newRedis(t, bus.RedisConfig{ClusterAddrs: cluster.Addrs(), Prefix: prefix})
	for i := range 6 { // channels spread over the shards
		ch := fmt.Sprintf("ws:%d", i)
		sub := mustSubscribe(t, b, ch, func([]byte) {})
		owners := 0
		for _, node := range cluster.Nodes {
			reply, err := node.Do("PUBSUB", "SHARDNUMSUB", prefix+ch)
			if err != nil {
				t.Fatalf("PUBSUB SHARDNUMSUB on %s: %v", node.Addr(), err)
			}
			if strings.HasSuffix(reply, "\n1") {
				owners++
			}
			// Classic pub/sub would be visible cluster-wide; it must not be used.
			if reply, err := node.Do("PUBSUB", "NUMSUB", prefix+ch); err != nil || !strings.HasSuffix(reply, "\n0") {
				t.Fatalf("PUBSUB NUMSUB on %s = %q, %v; want no classic subscriber", node.Addr(), reply, err)
			}
		}
		if owners != 1 {
			t.Fatalf("%s: shard subscription seen on %d nodes, want 1", ch, owners)
		}
		if err := sub.Unsubscribe(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRedisCountIsPerSubscription: two subscriptions of one channel in one
// instance count 2, also for a plain PUBLISH sent by somebody else.
func TestRedisCountIsPerSubscription(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	b := newRedis(t, bus.RedisConfig{URL: srv.URL(), Prefix: prefix, PingInterval: 50 * time.Millisecond})
	got := make(chan string, 4)
	s1 := mustSubscribe(t, b, "multi", func(m []byte) { got <- "1:" + string(m) })
	s2 := mustSubscribe(t, b, "multi", func(m []byte) { got <- "2:" + string(m) })
	if n, err := srv.Do("PUBLISH", prefix+"multi", "raw"); err != nil || n != "2" {
		t.Fatalf("plain PUBLISH = %s, %v; want 2", n, err)
	}
	seen := map[string]bool{awaitOne(t, got): true, awaitOne(t, got): true}
	if !seen["1:raw"] || !seen["2:raw"] {
		t.Fatalf("seen %v", seen)
	}
	if err := s1.Unsubscribe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Publish(context.Background(), "multi", []byte("x")); err != nil || n != 1 {
		t.Fatalf("Publish after one Unsubscribe = %d, %v; want 1", n, err)
	}
	if m := awaitOne(t, got); m != "2:x" {
		t.Fatalf("got %q, want 2:x", m)
	}
	if err := s2.Unsubscribe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Publish(context.Background(), "multi", []byte("y")); err != nil || n != 0 {
		t.Fatalf("Publish after both Unsubscribe = %d, %v; want 0", n, err)
	}
	// The second connection, idle now, is closed; the first one stays.
	testwait.Until(t, recoveryWait, func() bool {
		list, err := srv.Do("CLIENT", "LIST", "TYPE", "pubsub")
		return err == nil && strings.Count(strings.TrimSpace(list), "\n") == 0 && list != ""
	}, "the idle extra connection to close")
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

func TestRedisRestartResubscribesAndReadyTracksOutage(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	reconnected := make(chan struct{}, 16)
	b := newRedis(t, bus.RedisConfig{
		URL: srv.URL(), Prefix: prefix, PingInterval: 100 * time.Millisecond,
		OnReconnect: func() { reconnected <- struct{}{} },
	})
	pub := newRedis(t, bus.RedisConfig{URL: srv.URL(), Prefix: prefix})
	got := make(chan string, 16)
	mustSubscribe(t, b, "ws:1", func(m []byte) { got <- string(m) })
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("Ready before the outage: %v", err)
	}
	mustPublishN(t, pub, "ws:1", "before", 1)
	if m := awaitOne(t, got); m != "before" {
		t.Fatalf("got %q", m)
	}

	srv.Stop()
	testwait.Until(t, recoveryWait, func() bool {
		return b.Ready(context.Background()) != nil
	}, "Ready to fail while Redis is down")
	// A Subscribe during the outage waits for Redis, within its ctx.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := b.Subscribe(ctx, "ws:2", func([]byte) {})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Subscribe during the outage = %v; want deadline exceeded", err)
	}
	if err := b.Ready(context.Background()); err == nil {
		t.Fatal("Ready succeeded while Redis is down")
	}

	srv.Restart()
	testwait.Until(t, recoveryWait, func() bool {
		return b.Ready(context.Background()) == nil
	}, "Ready after Redis came back")
	select {
	case <-reconnected:
	case <-time.After(recoveryWait):
		t.Fatal("OnReconnect not called")
	}
	// The subscription made before the restart is back: the restarted,
	// empty server counts it and delivers to it.
	testwait.Until(t, recoveryWait, func() bool {
		_, err := pub.Publish(context.Background(), "warmup", nil)
		return err == nil
	}, "publisher to reconnect")
	mustPublishN(t, pub, "ws:1", "after", 1)
	if m := awaitOne(t, got); m != "after" {
		t.Fatalf("got %q", m)
	}
	if extra := len(got); extra != 0 {
		t.Fatalf("%d unexpected deliveries", extra)
	}
}

// TestRedisSilentSubscriptionDeathIsNoticed black-holes the pub/sub
// connection: Redis still counts the subscriber, nothing arrives, nothing
// fails. Only the self-ping can tell.
func TestRedisSilentSubscriptionDeathIsNoticed(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	prefix := uniquePrefix(t)
	reconnected := make(chan struct{}, 16)
	b := newRedis(t, bus.RedisConfig{
		URL: proxy.URL(), Prefix: prefix,
		PingInterval: 100 * time.Millisecond, PingTimeout: 500 * time.Millisecond,
		OnReconnect: func() { reconnected <- struct{}{} },
	})
	pub := newRedis(t, bus.RedisConfig{URL: srv.URL(), Prefix: prefix})
	got := make(chan string, 16)
	mustSubscribe(t, b, "ws:1", func(m []byte) { got <- string(m) })
	mustPublishN(t, pub, "ws:1", "before", 1)
	if m := awaitOne(t, got); m != "before" {
		t.Fatalf("got %q", m)
	}

	if n := proxy.BlackholeSubscribers(); n != 1 {
		t.Fatalf("black-holed %d connections, want the bus's one", n)
	}
	testwait.Until(t, recoveryWait, func() bool {
		return b.Ready(context.Background()) != nil
	}, "Ready to fail after the subscription died silently")
	testwait.Until(t, recoveryWait, func() bool {
		return b.Ready(context.Background()) == nil
	}, "Ready after the connection was replaced")
	select {
	case <-reconnected:
	case <-time.After(recoveryWait):
		t.Fatal("OnReconnect not called")
	}
	// The black-holed connection is closed by the bus, so Redis stops
	// counting it; then exactly the new subscription receives.
	testwait.Until(t, recoveryWait, func() bool {
		n, err := pub.Publish(context.Background(), "ws:1", []byte("probe"))
		return err == nil && n == 1
	}, "the dead connection to leave Redis")
	mustPublishN(t, pub, "ws:1", "after", 1)
	for {
		m := awaitOne(t, got)
		if m == "after" {
			break
		}
		if m != "probe" {
			t.Fatalf("got %q", m)
		}
	}
}

// TestRedisKilledSubscriptionIsResubscribed: CLIENT KILL TYPE pubsub drops
// the connection from the server side. OnLost runs before the connection
// subscribes again: what it publishes reaches no subscriber, and OnReconnect
// comes after it.
func TestRedisKilledSubscriptionIsResubscribed(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	reconnected := make(chan struct{}, 16)
	lost := make(chan string, 16) // subscribers a publish from OnLost reached
	b := newRedis(t, bus.RedisConfig{
		URL: srv.URL(), Prefix: prefix, PingInterval: 100 * time.Millisecond,
		OnLost: func() {
			n, err := srv.Do("PUBLISH", prefix+"ws:1", "during")
			if err != nil {
				n = err.Error()
			}
			lost <- n
		},
		OnReconnect: func() {
			if len(lost) == 0 {
				t.Error("OnReconnect before OnLost")
			}
			reconnected <- struct{}{}
		},
	})
	got := make(chan string, 16)
	mustSubscribe(t, b, "ws:1", func(m []byte) { got <- string(m) })
	killed, err := srv.Do("CLIENT", "KILL", "TYPE", "pubsub")
	if err != nil || killed != "1" {
		t.Fatalf("CLIENT KILL TYPE pubsub = %s, %v; want 1", killed, err)
	}
	select {
	case <-reconnected:
	case <-time.After(recoveryWait):
		t.Fatal("OnReconnect not called after the pub/sub connection was killed")
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("Ready after resubscribing: %v", err)
	}
	if n := <-lost; n != "0" {
		t.Fatalf("a publish from OnLost reached %s subscribers, want 0: OnLost must run before the connection subscribes again", n)
	}
	mustPublishN(t, b, "ws:1", "after", 1)
	if m := awaitOne(t, got); m != "after" {
		t.Fatalf("got %q, want the message published after the reconnect alone", m)
	}
}

func TestNewRedisFailsWhenRedisIsUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := bus.NewRedis(ctx, bus.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix(t)})
	if err == nil {
		_ = b.Close()
		t.Fatal("NewRedis succeeded without a server")
	}
	if ctx.Err() != nil {
		t.Fatalf("NewRedis took until its deadline to fail: %v", err)
	}
}

func TestNewRedisRejectsAmbiguousConfig(t *testing.T) {
	ctx := context.Background()
	if _, err := bus.NewRedis(ctx, bus.RedisConfig{}); err == nil {
		t.Fatal("NewRedis accepted neither URL nor ClusterAddrs")
	}
	if _, err := bus.NewRedis(ctx, bus.RedisConfig{URL: "redis://127.0.0.1:1", ClusterAddrs: []string{"127.0.0.1:2"}}); err == nil {
		t.Fatal("NewRedis accepted both URL and ClusterAddrs")
	}
	if _, err := bus.NewRedis(ctx, bus.RedisConfig{URL: "http://nope"}); err == nil {
		t.Fatal("NewRedis accepted a non-redis URL")
	}
}

// TestRedisCloseReleasesWaitingSubscribe: a Subscribe waiting for Redis
// returns ErrClosed when the bus closes.
func TestRedisCloseReleasesWaitingSubscribe(t *testing.T) {
	srv := redistest.Start(t)
	b := newRedis(t, bus.RedisConfig{URL: srv.URL(), Prefix: uniquePrefix(t)})
	srv.Stop()
	errc := make(chan error, 1)
	go func() {
		_, err := b.Subscribe(context.Background(), "ws:1", func([]byte) {})
		errc <- err
	}()
	testwait.Until(t, recoveryWait, func() bool { return b.Ready(context.Background()) != nil }, "Ready to fail")
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, bus.ErrClosed) {
			t.Fatalf("Subscribe = %v; want ErrClosed", err)
		}
	case <-time.After(recoveryWait):
		t.Fatal("Subscribe still blocked after Close")
	}
	if err := b.Ready(context.Background()); !errors.Is(err, bus.ErrClosed) {
		t.Fatalf("Ready after Close = %v; want ErrClosed", err)
	}
}

func mustSubscribe(t *testing.T, b bus.Bus, ch string, h bus.Handler) bus.Subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), recoveryWait)
	defer cancel()
	sub, err := b.Subscribe(ctx, ch, h)
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", ch, err)
	}
	return sub
}

func mustPublishN(t *testing.T, b bus.Bus, ch, msg string, want int) {
	t.Helper()
	n, err := b.Publish(context.Background(), ch, []byte(msg))
	if err != nil || n != want {
		t.Fatalf("Publish(%s) = %d, %v; want %d", ch, n, err, want)
	}
}

func awaitOne(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(recoveryWait):
		t.Fatal("no delivery within", recoveryWait)
		return ""
	}
}

// TestRedisClusterSlotMigrationMovesSubscription moves the slot of a
// subscribed channel to another node: Redis ends the shard subscription on
// the old node, and the bus must follow the slot.
func TestRedisClusterSlotMigrationMovesSubscription(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	prefix := uniquePrefix(t)
	reconnected := make(chan struct{}, 16)
	b := newRedis(t, bus.RedisConfig{
		ClusterAddrs: cluster.Addrs(), Prefix: prefix, PingInterval: 100 * time.Millisecond,
		OnReconnect: func() { reconnected <- struct{}{} },
	})
	pub := newRedis(t, bus.RedisConfig{ClusterAddrs: cluster.Addrs(), Prefix: prefix})
	got := make(chan string, 64)
	mustSubscribe(t, b, "ws:1", func(m []byte) { got <- string(m) })
	mustPublishN(t, pub, "ws:1", "before", 1)
	if m := awaitOne(t, got); m != "before" {
		t.Fatalf("got %q", m)
	}

	slot, err := cluster.Nodes[0].Do("CLUSTER", "KEYSLOT", prefix+"ws:1")
	if err != nil {
		t.Fatal(err)
	}
	var src, dst *redistest.Server
	for _, n := range cluster.Nodes {
		count, err := n.Do("PUBSUB", "SHARDNUMSUB", prefix+"ws:1")
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(count, "\n1") {
			src = n
		} else if dst == nil {
			dst = n
		}
	}
	if src == nil || dst == nil {
		t.Fatal("could not find the node serving the subscription")
	}
	srcID, err1 := src.Do("CLUSTER", "MYID")
	dstID, err2 := dst.Do("CLUSTER", "MYID")
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	// The slot holds no keys: migrating it is just handing it over.
	for _, step := range []struct {
		node *redistest.Server
		args []string
	}{
		{dst, []string{"CLUSTER", "SETSLOT", slot, "IMPORTING", srcID}},
		{src, []string{"CLUSTER", "SETSLOT", slot, "MIGRATING", dstID}},
		{dst, []string{"CLUSTER", "SETSLOT", slot, "NODE", dstID}},
		{src, []string{"CLUSTER", "SETSLOT", slot, "NODE", dstID}},
	} {
		if _, err := step.node.Do(step.args...); err != nil {
			t.Fatalf("%v on %s: %v", step.args, step.node.Addr(), err)
		}
	}
	for _, n := range cluster.Nodes {
		if n != src && n != dst {
			if _, err := n.Do("CLUSTER", "SETSLOT", slot, "NODE", dstID); err != nil {
				t.Fatal(err)
			}
		}
	}

	testwait.Until(t, recoveryWait, func() bool {
		count, err := dst.Do("PUBSUB", "SHARDNUMSUB", prefix+"ws:1")
		return err == nil && strings.HasSuffix(count, "\n1")
	}, "the subscription to follow its slot")
	testwait.Until(t, recoveryWait, func() bool { return b.Ready(context.Background()) == nil }, "Ready after the move")
	testwait.Until(t, recoveryWait, func() bool {
		n, err := pub.Publish(context.Background(), "ws:1", []byte("probe"))
		return err == nil && n == 1
	}, "a publish to reach the moved subscription")
	mustPublishN(t, pub, "ws:1", "after", 1)
	for {
		m := awaitOne(t, got)
		if m == "after" {
			break
		}
		if m != "probe" {
			t.Fatalf("got %q", m)
		}
	}
}
