package eio

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// The connection limits of one remote address: how fast it may open new
// Engine.IO sessions (a token bucket) and how many of its sessions may be
// open without having CONNECTed yet. Past either, the handshake is answered
// HTTP 429 with an Engine.IO error body and a Retry-After, before any
// WebSocket or session is made, so a flood from one source costs the broker
// little and holds up nobody else. Upgrades and the GETs and POSTs of an
// existing polling session are not new sessions and are not limited.
//
// An IPv6 source is limited by its /64, which one host usually holds
// whole. Loopback peers are exempt unless Config.LimitLoopback is set: a
// reverse proxy on the same host presents every client as loopback, and
// local tools and benchmarks open thousands of connections at once. With
// Config.TrustedProxies, a session from a trusted proxy is limited as the
// client its X-Forwarded-For names (proxy.Trust.Client).

// Defaults of the connection limits (Config.ConnRate and friends).
const (
	DefaultConnRate           = 50.0 // new sessions per second per remote address
	DefaultConnBurst          = 200
	DefaultMaxHandshakesPerIP = 128
)

// limitSweepEvery is how often the limiter drops the state of addresses
// back to a full bucket with nothing pending.
const limitSweepEvery = time.Minute

// burstQuiet is how long an address must go without a refusal for its
// burst of refusals to end: a flood above the rate has a connection
// admitted now and then, which does not end it.
const burstQuiet = 10 * time.Second

// connLimiter holds the limits' state per remote address. All methods are
// safe for concurrent use; none blocks.
type connLimiter struct {
	rate     float64 // tokens per second; <= 0: no rate limit
	burst    float64
	pending  int // <= 0: no bound on handshakes
	loopback bool
	log      zerolog.Logger
	refused  func(reason string)
	now      func() time.Time

	mu        sync.Mutex
	peers     map[netip.Addr]*peerLimit
	lastSweep time.Time
}

// peerLimit is one address's bucket and handshakes. A burst of refusals is
// logged when it starts and summed up when it ends, burstQuiet after its
// last refusal (at the next admission or sweep).
type peerLimit struct {
	tokens      float64
	last        time.Time // when tokens was computed
	pending     int
	refusing    bool
	refused     int       // in the current burst of refusals
	lastRefusal time.Time // of the current burst
}

func newConnLimiter(cfg *Config, log zerolog.Logger, refused func(reason string)) *connLimiter {
	return &connLimiter{
		rate:     cfg.ConnRate,
		burst:    float64(cfg.ConnBurst),
		pending:  cfg.MaxHandshakesPerIP,
		loopback: cfg.LimitLoopback,
		log:      log,
		refused:  refused,
		now:      time.Now,
		peers:    make(map[netip.Addr]*peerLimit),
	}
}

// handshake is an admitted session's place among its address's
// handshakes; release gives it back once (the session CONNECTed or ended).
// A nil *handshake (an address that is not limited) releases nothing.
type handshake struct {
	l    *connLimiter
	key  netip.Addr
	done atomic.Bool
}

func (h *handshake) release() {
	if h == nil || !h.done.CompareAndSwap(false, true) {
		return
	}
	h.l.mu.Lock()
	if p := h.l.peers[h.key]; p != nil && p.pending > 0 {
		p.pending--
	}
	h.l.mu.Unlock()
}

// limitKey is the address a remote "host:port" (or a bare address, a
// client behind a trusted proxy) is limited as, and whether it is limited
// at all.
func (l *connLimiter) limitKey(remote string) (netip.Addr, bool) {
	var a netip.Addr
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(remote); err != nil {
		// Not an IP peer (a Unix socket, a test's odd RemoteAddr): one
		// shared key, limited like loopback.
		return netip.Addr{}, l.loopback
	}
	a = a.Unmap()
	if a.IsLoopback() && !l.loopback {
		return a, false
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return a, true
}

// admit takes a token and a handshake place for a new session from remote.
// On refusal it returns the reason and how long until a retry could pass.
func (l *connLimiter) admit(remote string) (h *handshake, reason string, retry time.Duration) {
	if l.rate <= 0 && l.pending <= 0 {
		return nil, "", 0
	}
	key, limited := l.limitKey(remote)
	if !limited {
		return nil, "", 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now)
	p := l.peers[key]
	if p == nil {
		p = &peerLimit{tokens: l.burst, last: now}
		l.peers[key] = p
	}
	l.refillLocked(p, now)
	switch {
	case l.pending > 0 && p.pending >= l.pending:
		reason, retry = "too many handshakes in progress", time.Second
	case l.rate > 0 && p.tokens < 1:
		reason, retry = "connection rate", time.Duration((1-p.tokens)/l.rate*float64(time.Second))
	}
	if reason != "" {
		if !p.refusing {
			p.refusing = true
			l.log.Warn().Str("remote_ip", key.String()).Str("limit", reason).Float64("conn_rate", l.rate).
				Float64("conn_burst", l.burst).Int("max_handshakes", l.pending).Int("handshakes", p.pending).
				Msg("refusing new connections from this address (HTTP 429) until it slows down; logged once per burst")
		}
		p.refused++
		p.lastRefusal = now
		l.refused(reason)
		return nil, reason, max(retry, time.Second)
	}
	l.endBurstLocked(key, p, now)
	if l.rate > 0 {
		p.tokens--
	}
	p.pending++
	return &handshake{l: l, key: key}, "", 0
}

func (l *connLimiter) refillLocked(p *peerLimit, now time.Time) {
	if l.rate > 0 {
		p.tokens = math.Min(l.burst, p.tokens+now.Sub(p.last).Seconds()*l.rate)
	}
	p.last = now
}

// endBurstLocked ends the address's burst of refusals, if it had one and
// the last refusal is burstQuiet old, and logs how many there were.
func (l *connLimiter) endBurstLocked(key netip.Addr, p *peerLimit, now time.Time) {
	if p.refusing && now.Sub(p.lastRefusal) >= burstQuiet {
		l.log.Info().Str("remote_ip", key.String()).Int("refused", p.refused).Msg("admitting new connections from this address again")
		p.refusing, p.refused = false, 0
	}
}

// sweepLocked drops, at most once a minute, the addresses whose bucket is
// full and that have no handshake in progress: they are as if never seen.
func (l *connLimiter) sweepLocked(now time.Time) {
	if now.Sub(l.lastSweep) < limitSweepEvery {
		return
	}
	l.lastSweep = now
	for key, p := range l.peers {
		l.refillLocked(p, now)
		l.endBurstLocked(key, p, now)
		if p.pending == 0 && !p.refusing && (l.rate <= 0 || p.tokens >= l.burst) {
			delete(l.peers, key)
		}
	}
}

// admitSession applies the limits to a request that opens a new
// Engine.IO session from client (its address, TrustedProxies.Client). A
// refused request has been answered 429; ok is false.
func (srv *Server) admitSession(w http.ResponseWriter, client string) (*handshake, bool) {
	h, reason, retry := srv.limits.admit(client)
	if reason == "" {
		return h, true
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	writeEIOError(w, http.StatusTooManyRequests, 4, "Too many connections from this address ("+reason+"); retry later")
	return nil, false
}
