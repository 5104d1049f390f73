package revoke

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/internal/testwait"
)

// sharedEnv makes lists on one Redis (a server or a Cluster) and prefix,
// each with a bus of its own, all closed in t.Cleanup.
type sharedEnv struct {
	t       *testing.T
	url     string
	cluster []string
	prefix  string
	opts    Options
}

func (e *sharedEnv) list() *List {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := bus.NewRedis(ctx, bus.RedisConfig{URL: e.url, ClusterAddrs: e.cluster, Prefix: e.prefix})
	if err != nil {
		e.t.Fatalf("bus.NewRedis: %v", err)
	}
	l, err := NewShared(ctx, e.opts, RedisConfig{URL: e.url, ClusterAddrs: e.cluster, Prefix: e.prefix, Bus: b})
	if err != nil {
		_ = b.Close()
		e.t.Fatalf("NewShared: %v", err)
	}
	e.t.Cleanup(func() {
		_ = l.Close()
		_ = b.Close()
	})
	return l
}

// sharedEnvs are a single server and a three-master Cluster.
func sharedEnvs(t *testing.T, f func(t *testing.T, e *sharedEnv)) {
	t.Run("server", func(t *testing.T) {
		f(t, &sharedEnv{t: t, url: redistest.Start(t).URL(), prefix: redistest.Prefix(t)})
	})
	t.Run("cluster", func(t *testing.T) {
		f(t, &sharedEnv{t: t, cluster: redistest.StartCluster(t, 3).Addrs(), prefix: redistest.Prefix(t)})
	})
}

func TestSharedListTellsARevocationToEveryListWithinASecond(t *testing.T) {
	sharedEnvs(t, func(t *testing.T, e *sharedEnv) {
		a, b := e.list(), e.list()
		now := time.Now()
		tok := claims("t1", now, time.Hour, "w")
		ended := make(chan struct{})
		if _, ok := b.Track(tok, func() { close(ended) }); !ok {
			t.Fatal("Track refused a good token")
		}
		start := time.Now()
		if _, err := a.Revoke(context.Background(), mustDecode(t, `{"jti":"t1"}`), "jti:admin"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ended:
			if took := time.Since(start); took > time.Second {
				t.Fatalf("the other list ended the live token %s after the revocation, want within 1s", took)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the other list never ended the live token")
		}
		if !b.Revoked(tok) || len(b.Entries()) != 1 {
			t.Fatalf("the other list: revoked %v, entries %+v", b.Revoked(tok), b.Entries())
		}
		// A list made later loads it.
		if c := e.list(); !c.Revoked(tok) {
			t.Fatal("a list made after the revocation does not have it")
		}
	})
}

func TestSharedListResyncLoadsWhatItMissed(t *testing.T) {
	srv := redistest.Start(t)
	e := &sharedEnv{t: t, url: srv.URL(), prefix: redistest.Prefix(t)}
	l := e.list()
	// Entries written to the set without telling them: what a list cut
	// off from Redis misses. One has ended: it is not loaded.
	now := time.Now()
	zadd := func(jti string, end time.Time) {
		member, _ := json.Marshal(Entry{JTI: jti, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: end})
		if _, err := srv.Do("ZADD", e.prefix+Key, strconv.FormatInt(end.UnixMilli(), 10), string(member)); err != nil {
			t.Fatal(err)
		}
	}
	zadd("missed", now.Add(time.Hour))
	zadd("ended", now.Add(-time.Minute))
	tok := claims("missed", now, time.Hour, "w")
	if l.Revoked(tok) {
		t.Fatal("the list knew an entry nobody told it")
	}
	l.Resync()
	testwait.Until(t, 5*time.Second, func() bool { return l.Revoked(tok) }, "the resynced list refusing the missed jti")
	if list := l.Entries(); len(list) != 1 || list[0].JTI != "missed" {
		t.Fatalf("entries after resync: %+v, want only the one in effect", list)
	}
	// Adding drops the ended entry from the set and keeps the set until
	// its last entry ends.
	e2, err := l.Revoke(context.Background(), mustDecode(t, `{"jti":"new"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := srv.Do("ZCARD", e.prefix+Key); n != "2" {
		t.Fatalf("ZCARD = %s after an add, want 2 (the ended entry dropped)", n)
	}
	at, err := srv.Do("PEXPIRETIME", e.prefix+Key)
	if err != nil {
		t.Fatal(err)
	}
	if ms, _ := strconv.ParseInt(at, 10, 64); ms != e2.ExpiresAt.UnixMilli() {
		t.Fatalf("the set expires at %s, want its last entry's end %d", at, e2.ExpiresAt.UnixMilli())
	}
}

var _ auth.Revocations = (*List)(nil)
