package eio

import (
	"bytes"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// These tests drive a connLimiter by itself on a clock they move.

type limiterEnv struct {
	l       *connLimiter
	now     time.Time
	logs    *bytes.Buffer
	mu      sync.Mutex
	refused map[string]int
}

func newLimiterEnv(cfg Config) *limiterEnv {
	e := &limiterEnv{now: time.Unix(1_700_000_000, 0), logs: &bytes.Buffer{}, refused: map[string]int{}}
	e.l = newConnLimiter(&cfg, zerolog.New(e.logs), func(reason string) {
		e.mu.Lock()
		e.refused[reason]++
		e.mu.Unlock()
	})
	e.l.now = func() time.Time { return e.now }
	return e
}

// admitN admits n sessions from remote and returns how many passed, with
// their handshakes.
func (e *limiterEnv) admitN(remote string, n int) (int, []*handshake) {
	var hs []*handshake
	for range n {
		h, reason, _ := e.l.admit(remote)
		if reason == "" {
			hs = append(hs, h)
		}
	}
	return len(hs), hs
}

func TestConnLimiterRefusesPastTheBurstAndRefillsAtTheRate(t *testing.T) {
	e := newLimiterEnv(Config{ConnRate: 10, ConnBurst: 5, MaxHandshakesPerIP: -1})
	if n, _ := e.admitN("192.0.2.1:4000", 8); n != 5 {
		t.Fatalf("admitted %d of 8 at once, want the burst of 5", n)
	}
	_, reason, retry := e.l.admit("192.0.2.1:4000")
	if reason != "connection rate" || retry < time.Second {
		t.Fatalf("refusal %q retry %s, want connection rate, at least 1s", reason, retry)
	}
	e.now = e.now.Add(300 * time.Millisecond) // 3 tokens at 10/s
	if n, _ := e.admitN("192.0.2.1:4001", 5); n != 3 {
		t.Fatalf("admitted %d after 300ms at 10/s, want 3", n)
	}
	e.now = e.now.Add(time.Hour) // the bucket holds the burst, no more
	if n, _ := e.admitN("192.0.2.1:4002", 10); n != 5 {
		t.Fatalf("admitted %d after an hour, want the burst of 5", n)
	}
}

func TestConnLimiterBoundsHandshakesInProgress(t *testing.T) {
	e := newLimiterEnv(Config{ConnRate: -1, MaxHandshakesPerIP: 3})
	n, hs := e.admitN("192.0.2.1:1", 5)
	if n != 3 {
		t.Fatalf("admitted %d, want 3 handshakes in progress", n)
	}
	if _, reason, _ := e.l.admit("192.0.2.1:2"); reason != "too many handshakes in progress" {
		t.Fatalf("refusal %q", reason)
	}
	hs[0].release()
	hs[0].release() // a second release gives back nothing more
	if n, _ := e.admitN("192.0.2.1:3", 3); n != 1 {
		t.Fatalf("admitted %d after one release, want 1", n)
	}
	if e.refused["too many handshakes in progress"] != 5 {
		t.Fatalf("refusals counted: %v", e.refused)
	}
}

func TestConnLimiterKeepsAddressesApartAndIPv6ByItsSlash64(t *testing.T) {
	e := newLimiterEnv(Config{ConnRate: 1, ConnBurst: 2, MaxHandshakesPerIP: -1})
	for _, remote := range []string{"192.0.2.1:1", "192.0.2.2:1", "[2001:db8:1:2::1]:1", "[2001:db8:1:3::1]:1"} {
		if n, _ := e.admitN(remote, 3); n != 2 {
			t.Errorf("%s: admitted %d, want 2 of its own", remote, n)
		}
	}
	// Another host of the same /64 shares its bucket.
	if n, _ := e.admitN("[2001:db8:1:2:ffff::9]:7", 1); n != 0 {
		t.Errorf("same /64: admitted %d, want 0", n)
	}
	// An IPv4-mapped IPv6 address is the IPv4 address.
	if n, _ := e.admitN("[::ffff:192.0.2.1]:9", 1); n != 0 {
		t.Errorf("mapped 192.0.2.1: admitted %d, want 0", n)
	}
}

func TestConnLimiterExemptsLoopbackUnlessAsked(t *testing.T) {
	e := newLimiterEnv(Config{ConnRate: 1, ConnBurst: 1, MaxHandshakesPerIP: 1})
	for _, remote := range []string{"127.0.0.1:1", "127.0.0.2:1", "[::1]:1"} {
		if n, hs := e.admitN(remote, 100); n != 100 || hs[0] != nil {
			t.Errorf("%s: admitted %d of 100, want all, unlimited", remote, n)
		}
	}
	e = newLimiterEnv(Config{ConnRate: 1, ConnBurst: 1, MaxHandshakesPerIP: 10, LimitLoopback: true})
	if n, _ := e.admitN("127.0.0.1:1", 5); n != 1 {
		t.Errorf("LimitLoopback: admitted %d, want 1", n)
	}
	if n, _ := e.admitN("127.0.0.2:1", 5); n != 1 {
		t.Errorf("LimitLoopback, another loopback address: admitted %d, want 1", n)
	}
}

func TestConnLimiterOff(t *testing.T) {
	e := newLimiterEnv(Config{ConnRate: -1, MaxHandshakesPerIP: -1})
	if n, _ := e.admitN("192.0.2.1:1", 1000); n != 1000 {
		t.Fatalf("admitted %d, want all", n)
	}
	if len(e.l.peers) != 0 {
		t.Fatalf("state kept for %d addresses with the limits off", len(e.l.peers))
	}
}

func TestConnLimiterLogsOncePerBurst(t *testing.T) {
	e := newLimiterEnv(Config{ConnRate: 1, ConnBurst: 1, MaxHandshakesPerIP: -1})
	for burst := range 2 {
		// A flood above the rate: a connection admitted now and then
		// does not end the burst.
		for range 5 {
			e.admitN("192.0.2.1:1", 10)
			e.now = e.now.Add(time.Second)
		}
		// Quiet long enough: the next admission ends it.
		e.now = e.now.Add(burstQuiet)
		if n, _ := e.admitN("192.0.2.1:1", 1); n != 1 {
			t.Fatalf("burst %d: not admitted after the quiet", burst)
		}
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "refusing new connections from this address"); n != 2 {
		t.Errorf("%d refusal lines for 2 bursts, want 2:\n%s", n, logs)
	}
	if n := strings.Count(logs, "admitting new connections from this address again"); n != 2 || !strings.Contains(logs, `"refused":45`) {
		t.Errorf("want 2 end-of-burst lines counting 45 refusals each:\n%s", logs)
	}
	if !strings.Contains(logs, `"remote_ip":"192.0.2.1"`) {
		t.Errorf("lines do not name the address:\n%s", logs)
	}
}

func TestConnLimiterForgetsIdleAddresses(t *testing.T) {
	e := newLimiterEnv(Config{ConnRate: 10, ConnBurst: 10, MaxHandshakesPerIP: 5})
	_, held := e.admitN("192.0.2.1:1", 1)
	_, done := e.admitN("192.0.2.2:1", 1)
	done[0].release()
	e.now = e.now.Add(2 * limitSweepEvery)
	e.admitN("192.0.2.3:1", 1) // sweeps
	if _, ok := e.l.peers[mustAddr(t, "192.0.2.2")]; ok {
		t.Error("an idle address with a full bucket was kept")
	}
	if _, ok := e.l.peers[mustAddr(t, "192.0.2.1")]; !ok {
		t.Error("an address with a handshake in progress was dropped")
	}
	held[0].release()
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
