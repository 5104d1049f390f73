package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/internal/testwait"
)

// outcome is one PublishAsync result.
type outcome struct {
	n   int
	err error
}

// publishAsync publishes and returns a channel that gets the outcome.
func publishAsync(b *bus.Redis, channel string, msg []byte) <-chan outcome {
	ch := make(chan outcome, 2) // 2: a second done call must not block, so the test sees it
	b.PublishAsync(channel, msg, func(n int, err error) { ch <- outcome{n, err} })
	return ch
}

func awaitOutcome(t *testing.T, ch <-chan outcome, within time.Duration) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(within):
		t.Fatalf("PublishAsync outcome not reported within %v", within)
		return outcome{}
	}
}

// TestRedisPublishAsyncConcurrentCountsOnceEachInOrder: many goroutines
// publish at once, so commands share writes; each outcome is reported
// exactly once with Redis' count, and each goroutine's messages arrive in
// the order it published them.
func TestRedisPublishAsyncConcurrentCountsOnceEachInOrder(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	sub := newRedis(t, bus.RedisConfig{URL: srv.URL(), Prefix: prefix})
	pub := newRedis(t, bus.RedisConfig{URL: srv.URL(), Prefix: prefix})
	const writers, each = 64, 200
	var mu sync.Mutex
	seen := make([]int, writers) // per writer, one past the last sequence number seen
	var outOfOrder []string
	received := make(chan struct{}, writers*each)
	mustSubscribe(t, sub, "busy", func(m []byte) {
		w, seq, _ := strings.Cut(string(m), ":")
		wi, _ := strconv.Atoi(w)
		si, _ := strconv.Atoi(seq)
		mu.Lock()
		if si < seen[wi] {
			outOfOrder = append(outOfOrder, fmt.Sprintf("writer %d: got %d after %d", wi, si, seen[wi]-1))
		}
		seen[wi] = si + 1
		mu.Unlock()
		received <- struct{}{}
	})

	var calls sync.Map // message -> number of done calls
	var wg sync.WaitGroup
	results := make(chan outcome, 2*writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("%d:%d", w, i)
				channel := "busy"
				if i%10 == 9 {
					channel = "nobody" // every tenth reaches no subscriber
					key = "x" + key
				}
				pub.PublishAsync(channel, []byte(key), func(n int, err error) {
					c, _ := calls.LoadOrStore(key, new(int))
					mu.Lock()
					*c.(*int)++
					mu.Unlock()
					if channel == "nobody" && err == nil && n != 0 {
						err = fmt.Errorf("count %d on a channel nobody subscribes", n)
					} else if channel == "busy" && err == nil && n != 1 {
						err = fmt.Errorf("count %d on a channel with one subscriber", n)
					}
					results <- outcome{n, err}
				})
			}
		})
	}
	wg.Wait()
	for range writers * each {
		if o := awaitOutcome(t, results, 10*time.Second); o.err != nil {
			t.Fatal(o.err)
		}
	}
	busy := writers * each * 9 / 10
	for range busy {
		select {
		case <-received:
		case <-time.After(10 * time.Second):
			t.Fatal("not every message arrived")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(outOfOrder) > 0 {
		t.Fatalf("%d messages out of order, first: %s", len(outOfOrder), outOfOrder[0])
	}
	n := 0
	calls.Range(func(k, v any) bool {
		if *v.(*int) != 1 {
			t.Errorf("done called %d times for %s", *v.(*int), k)
		}
		n++
		return true
	})
	if n != writers*each {
		t.Fatalf("done called for %d publishes, want %d", n, writers*each)
	}
	if len(results) != 0 {
		t.Fatalf("%d extra outcomes", len(results))
	}
}

// TestRedisPublishAsyncReportsAStalledRedis: Redis stops answering
// (CLIENT PAUSE); a publish is reported failed once the read timeout passes,
// not when Redis resumes, and publishing works again afterwards.
func TestRedisPublishAsyncReportsAStalledRedis(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	const readTimeout = 300 * time.Millisecond
	pub := newRedis(t, bus.RedisConfig{URL: srv.URL() + "?read_timeout=300ms", Prefix: prefix, PingInterval: time.Minute})
	if o := awaitOutcome(t, publishAsync(pub, "warm", []byte("x")), 5*time.Second); o.err != nil {
		t.Fatalf("publish before the pause: %v", o.err)
	}
	const pause = 3 * time.Second
	if _, err := srv.Do("CLIENT", "PAUSE", strconv.Itoa(int(pause/time.Millisecond)), "ALL"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	o := awaitOutcome(t, publishAsync(pub, "stalled", []byte("x")), pause)
	took := time.Since(start)
	if o.err == nil {
		t.Fatalf("publish during the pause = %d, nil; want an error", o.n)
	}
	if took < readTimeout-50*time.Millisecond || took > readTimeout+time.Second {
		t.Fatalf("stalled publish failed after %v; want about the read timeout %v", took, readTimeout)
	}
	if _, err := srv.Do("CLIENT", "UNPAUSE"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, recoveryWait, func() bool {
		o := awaitOutcome(t, publishAsync(pub, "again", []byte("x")), 5*time.Second)
		return o.err == nil
	}, "publishing to work again")
}

// TestRedisPublishAsyncSurvivesRestart: while Redis restarts every publish
// is answered (an error or a count), and once it is back publishes reach
// subscribers again.
func TestRedisPublishAsyncSurvivesRestart(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	pub := newRedis(t, bus.RedisConfig{URL: srv.URL(), Prefix: prefix})
	sub := newRedis(t, bus.RedisConfig{URL: srv.URL(), Prefix: prefix, PingInterval: 100 * time.Millisecond})
	got := make(chan string, 64)
	mustSubscribe(t, sub, "ws", func(m []byte) { got <- string(m) })
	if o := awaitOutcome(t, publishAsync(pub, "ws", []byte("before")), 5*time.Second); o.err != nil || o.n != 1 {
		t.Fatalf("before the restart: %+v", o)
	}
	srv.Stop()
	var pending []<-chan outcome
	for i := range 20 {
		pending = append(pending, publishAsync(pub, "ws", []byte("during"+strconv.Itoa(i))))
	}
	for _, ch := range pending {
		if o := awaitOutcome(t, ch, 10*time.Second); o.err == nil {
			t.Fatalf("publish while Redis is down = %d, nil; want an error", o.n)
		}
	}
	srv.Restart()
	testwait.Until(t, recoveryWait, func() bool { return sub.Ready(context.Background()) == nil }, "subscriber back")
	testwait.Until(t, recoveryWait, func() bool {
		o := awaitOutcome(t, publishAsync(pub, "ws", []byte("after")), 5*time.Second)
		return o.err == nil && o.n == 1
	}, "publish to reach the subscriber")
	for m := range len(got) {
		_ = m
		if s := <-got; strings.HasPrefix(s, "during") {
			t.Fatalf("a publish reported failed was delivered: %q", s)
		}
	}
}

// TestRedisCloseFailsPendingPublishes: Close answers a publish Redis has
// not answered yet with ErrClosed at once.
func TestRedisCloseFailsPendingPublishes(t *testing.T) {
	srv := redistest.Start(t)
	prefix := uniquePrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub, err := bus.NewRedis(ctx, bus.RedisConfig{URL: srv.URL(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if o := awaitOutcome(t, publishAsync(pub, "warm", []byte("x")), 5*time.Second); o.err != nil {
		t.Fatal(o.err)
	}
	if _, err := srv.Do("CLIENT", "PAUSE", "2000", "ALL"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = srv.Do("CLIENT", "UNPAUSE") }()
	ch := publishAsync(pub, "paused", []byte("x"))
	start := time.Now()
	if err := pub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	o := awaitOutcome(t, ch, time.Second)
	if !errors.Is(o.err, bus.ErrClosed) {
		t.Fatalf("pending publish after Close = %d, %v; want ErrClosed", o.n, o.err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close with a pending publish took %v", took)
	}
	o = awaitOutcome(t, publishAsync(pub, "later", []byte("x")), time.Second)
	if !errors.Is(o.err, bus.ErrClosed) {
		t.Fatalf("publish after Close = %d, %v; want ErrClosed", o.n, o.err)
	}
}

// TestRedisPublishesAuthenticateAndAreNamed: the publishing connection
// authenticates with the URL's credentials (an ACL user, or the password
// alone) and names itself for CLIENT LIST.
func TestRedisPublishesAuthenticateAndAreNamed(t *testing.T) {
	srv := redistest.Start(t)
	check := func(t *testing.T, url string) {
		prefix := uniquePrefix(t)
		b := newRedis(t, bus.RedisConfig{URL: url, Prefix: prefix, InstanceID: "inst-1"})
		got := make(chan string, 1)
		mustSubscribe(t, b, "ch", func(m []byte) { got <- string(m) })
		if o := awaitOutcome(t, publishAsync(b, "ch", []byte("hello")), 5*time.Second); o.err != nil || o.n != 1 {
			t.Fatalf("publish = %+v; want 1 receiver", o)
		}
		if m := awaitOne(t, got); m != "hello" {
			t.Fatalf("got %q", m)
		}
	}
	t.Run("ACLUser", func(t *testing.T) {
		if _, err := srv.Do("ACL", "SETUSER", "tether", "on", ">pw1", "~*", "&*", "+@all"); err != nil {
			t.Fatal(err)
		}
		check(t, "redis://tether:pw1@"+srv.Addr())
		list, err := srv.Do("CLIENT", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		named := false
		for line := range strings.Lines(list) {
			if strings.Contains(line, "name=test:") && strings.Contains(line, "pub:inst-1 ") && strings.Contains(line, " user=tether ") {
				named = true
			}
		}
		if !named {
			t.Fatalf("no connection named …pub:inst-1 for user tether in CLIENT LIST:\n%s", list)
		}
	})
	// A URL with a password for a server that has none: go-redis's
	// subscriber accepts it, so publishing must too (it used to fail every
	// publish of a broker that had started and reported routing).
	t.Run("PasswordTheServerDoesNotNeed", func(t *testing.T) {
		check(t, "redis://:unneeded@"+srv.Addr())
	})
	t.Run("Password", func(t *testing.T) {
		if _, err := srv.Do("CONFIG", "SET", "requirepass", "s3cret"); err != nil {
			t.Fatal(err)
		}
		check(t, "redis://:s3cret@"+srv.Addr())
	})
}
