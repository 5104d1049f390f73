package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/broker/store/storetest"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// newRedis returns a store on a bus of its own (like one broker instance),
// both closed in t.Cleanup.
func newRedis(t *testing.T, cfg store.RedisConfig) *store.Redis {
	t.Helper()
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Bus = newBus(t, bus.RedisConfig{URL: cfg.URL, ClusterAddrs: cfg.ClusterAddrs, Prefix: cfg.Prefix, Logger: cfg.Logger})
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
		cfg := store.RedisConfig{URL: srv.URL(), Prefix: redistest.Prefix(t), Options: opts}
		return newRedis(t, cfg), newRedis(t, cfg)
	})
}

func TestRedisClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3)
	storetest.Run(t, func(t *testing.T, opts store.Options) (store.Store, store.Store) {
		cfg := store.RedisConfig{ClusterAddrs: cl.Addrs(), Prefix: redistest.Prefix(t), Options: opts}
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

// TestRedisCreateHandsANewCallToTheHolder: on a single server Create
// publishes the call on its workspace channel; heard by a holder it is
// recorded delivered and never queued, heard by nobody it is queued. On a
// Cluster it is queued and the caller tells the holder (Told -1).
func TestRedisCreateHandsANewCallToTheHolder(t *testing.T) {
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	st := newRedis(t, store.RedisConfig{URL: srv.URL(), Prefix: prefix})
	holder := newBus(t, bus.RedisConfig{URL: srv.URL(), Prefix: prefix})
	heard := make(chan protocol.BusMessage, 1)
	sub, err := holder.Subscribe(context.Background(), protocol.WorkspaceChannel("ws-held"), func(msg []byte) {
		var m protocol.BusMessage
		_ = protocol.DecodeBusMessage(msg, &m)
		heard <- m
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe(context.Background()) })
	now := time.Now()
	rec := store.Record{CorrelationID: "direct-1", WorkspaceID: "ws-held", Endpoint: "/api/ping", Payload: json.RawMessage(`[1]`), Timeout: 5, CreatedAt: now, Deadline: now.Add(5 * time.Second)}
	got, err := st.Create(context.Background(), rec)
	if err != nil || got.Told != 1 || got.Record.Status != store.Delivered || got.Record.DeliveredAt == nil {
		t.Fatalf("Create for a held workspace = %+v, %v", got, err)
	}
	m := <-heard
	if m.Type != protocol.BusCall || !m.Async || m.CorrelationID != "direct-1" || string(m.Payload) != "[1]" || m.DeadlineMS != rec.Deadline.UnixMilli() {
		t.Fatalf("the holder heard %+v", m)
	}
	if stored, _ := st.Get(context.Background(), "direct-1"); stored.Status != store.Delivered {
		t.Fatalf("stored %+v", stored)
	}
	if claimed, err := st.Claim(context.Background(), "ws-held", time.Now(), 10); err != nil || len(claimed) != 0 {
		t.Fatalf("also queued: %+v, %v", claimed, err)
	}
	// The sweep ends it at deadline + grace if its holder never answers.
	if n, _ := st.Sweep(context.Background(), rec.Deadline.Add(store.DefaultGrace), 10); n != 1 {
		t.Fatalf("swept %d", n)
	}

	rec.CorrelationID, rec.WorkspaceID = "queued-1", "ws-nobody"
	got, err = st.Create(context.Background(), rec)
	if err != nil || got.Told != 0 || got.Record.Status != store.Queued {
		t.Fatalf("Create for an offline workspace = %+v, %v", got, err)
	}
	if claimed, err := st.Claim(context.Background(), "ws-nobody", time.Now(), 10); err != nil || len(claimed) != 1 {
		t.Fatalf("not queued: %+v, %v", claimed, err)
	}

	if testing.Short() {
		return
	}
	cl := redistest.StartCluster(t, 3)
	cst := newRedis(t, store.RedisConfig{ClusterAddrs: cl.Addrs(), Prefix: prefix})
	rec.CorrelationID = "cluster-1"
	if got, err := cst.Create(context.Background(), rec); err != nil || got.Told != -1 || got.Record.Status != store.Queued {
		t.Fatalf("Create on a cluster = %+v, %v", got, err)
	}
}

// TestRedisPendingKnowsItsOwnCallsUntilTheirOutcome: the instance that
// created a call knows it without a read until it hears of its outcome,
// wherever it was written, and a Watch registered before asking fires on
// that outcome.
func TestRedisPendingKnowsItsOwnCallsUntilTheirOutcome(t *testing.T) {
	srv := redistest.Start(t)
	cfg := store.RedisConfig{URL: srv.URL(), Prefix: redistest.Prefix(t), Options: store.Options{Grace: time.Millisecond}}
	a, b := newRedis(t, cfg), newRedis(t, cfg)
	ctx := context.Background()
	now := time.Now()
	rec := store.Record{CorrelationID: "pending-1", WorkspaceID: "ws", Endpoint: "/x", Payload: json.RawMessage(`[1]`), Timeout: 30, CreatedAt: now, Deadline: now.Add(30 * time.Second)}
	if _, err := a.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Pending("pending-1"); ok {
		t.Fatal("another instance knows the call as pending")
	}
	outcome, stop := a.Watch("pending-1")
	defer stop()
	got, ok := a.Pending("pending-1")
	if !ok || got.Status != store.Queued || got.WorkspaceID != "ws" || got.Payload != nil {
		t.Fatalf("Pending on the creating instance = %+v, %v", got, ok)
	}
	// The outcome written by the other instance reaches the watch, and the
	// call is no longer pending.
	if _, err := b.Finish(ctx, "pending-1", protocol.Success("pending-1", json.RawMessage(`1`)), time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-outcome:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch registered before Pending did not fire on the outcome")
	}
	if _, ok := a.Pending("pending-1"); ok {
		t.Fatal("still pending after its outcome")
	}
	// Its own Finish forgets it at once; the deadline plus grace too.
	rec.CorrelationID = "pending-2"
	if _, err := a.CreateDelivered(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Finish(ctx, "pending-2", protocol.Failure("pending-2", protocol.CodeCancelled, "x"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Pending("pending-2"); ok {
		t.Fatal("pending after its own Finish")
	}
	rec.CorrelationID, rec.Deadline = "pending-3", time.Now().Add(20*time.Millisecond)
	if _, err := a.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// Time passing is what is tested: Pending forgets a call once the
	// clock is past its deadline plus grace.
	time.Sleep(30 * time.Millisecond)
	if _, ok := a.Pending("pending-3"); ok {
		t.Fatal("pending past its deadline plus grace")
	}
}

// newBus is a Redis bus closed in t.Cleanup.
func newBus(t *testing.T, cfg bus.RedisConfig) *bus.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.NewRedis(ctx, cfg)
	if err != nil {
		t.Fatalf("bus.NewRedis: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// An outcome is told to the instances that may wait for the call (the one
// that recorded it, those that read it to wait), each on its own channel,
// and to nobody when the instance that recorded it writes it: never to
// every instance.
func TestRedisTellsAnOutcomeOnlyToTheInstancesThatMayWait(t *testing.T) {
	srv := redistest.Start(t)
	cfg := store.RedisConfig{URL: srv.URL(), Prefix: redistest.Prefix(t)}
	a, b, c := newRedis(t, cfg), newRedis(t, cfg), newRedis(t, cfg)
	ctx := context.Background()

	// Every outcome message on any instance's channel.
	spy := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer spy.Close()
	sub := spy.PSubscribe(ctx, cfg.Prefix+store.OutcomeChannel+":*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	told := sub.Channel()
	// quiet checks that nothing more was told by the steps taken so far: a
	// marker the spy publishes now comes back first, since Redis hands a
	// subscription what it hears in the order it was published, and the
	// steps' scripts published before they returned.
	marker := cfg.Prefix + store.OutcomeChannel + ":marker"
	quiet := func(what string) {
		t.Helper()
		if err := spy.Publish(ctx, marker, what).Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-told:
			if m.Channel != marker {
				t.Fatalf("%s: told %s on %s", what, m.Payload, m.Channel)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the spy's marker did not come back", what)
		}
	}

	newRec := func(cid string) store.Record {
		now := time.Now()
		return store.Record{CorrelationID: cid, WorkspaceID: "ws", Endpoint: "/x", Timeout: 30, CreatedAt: now, Deadline: now.Add(30 * time.Second)}
	}
	// Recorded and finished by a: nobody is told (a tells its own).
	if _, err := a.CreateDelivered(ctx, newRec("told-1")); err != nil {
		t.Fatal(err)
	}
	mine, stopMine := a.Watch("told-1")
	defer stopMine()
	if _, err := a.Finish(ctx, "told-1", protocol.Success("told-1", json.RawMessage(`1`)), time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := <-mine; got.Status != store.Succeeded {
		t.Fatalf("a's own watch got %+v", got)
	}
	quiet("an outcome written by the instance that recorded the call")

	// Recorded by a, read to wait by b, read plainly by c, finished by c:
	// a and b are told, once each, and c's watch hears nothing.
	if _, err := a.Create(ctx, newRec("told-2")); err != nil {
		t.Fatal(err)
	}
	bDone, stopB := b.Watch("told-2")
	defer stopB()
	if _, err := b.GetWatched(ctx, "told-2"); err != nil {
		t.Fatal(err)
	}
	cDone, stopC := c.Watch("told-2")
	defer stopC()
	if _, err := c.Get(ctx, "told-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Finish(ctx, "told-2", protocol.Success("told-2", json.RawMessage(`1`)), time.Now()); err != nil {
		t.Fatal(err)
	}
	channels := map[string]bool{}
	for range 2 {
		select {
		case m := <-told:
			if m.Payload != "told-2" || channels[m.Channel] {
				t.Fatalf("told %s on %s (already: %v)", m.Payload, m.Channel, channels)
			}
			channels[m.Channel] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("told on %v only, want the recording and the waiting instance's channels", channels)
		}
	}
	quiet("after telling the two instances that may wait")
	select {
	case <-bDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the instance that read the call to wait was not told")
	}
	// The spy hearing a's channel does not mean a has handled what it
	// heard: its own subscription reads the same message on its own time.
	testwait.Until(t, 5*time.Second, func() bool {
		_, ok := a.Pending("told-2")
		return !ok
	}, "the recording instance to drop the call it was told the outcome of")
	select {
	case got := <-cDone:
		if got.Status != store.Succeeded { // its own Finish's record
			t.Fatalf("c's watch got %+v", got)
		}
	default:
		t.Fatal("c's own Finish did not tell its watch")
	}
}
