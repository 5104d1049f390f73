// Package revoke is the broker's list of revoked tokens: by jti, or every
// token of a workspace issued before a time. The broker's auth.Verifier asks
// it on every Verify (List.Revoked, a lookup in an immutable index, never a
// round trip), and the live things that authenticated with a token (a
// bridge's socket, an MCP request or stream) are tracked here, so that a
// revocation ends them.
//
// A broker alone keeps its list in memory (New). Brokers that share a Redis
// share the list there (NewShared): one sorted set of the entries and one
// bus channel on which each new entry is told to every broker, which loads
// the whole set when it starts and again when it comes back from losing
// Redis (Resync).
//
// Revocations last until the token would have expired. A broker refuses
// a token that lives longer than MaxTokenTTL (exp - iat; without iat, exp
// further than MaxTokenTTL from now) as revoked, so that an entry can end:
// a jti entry ends at the token's expiry when this broker has seen the
// token live (a socket or MCP request holding it), else MaxTokenTTL after
// it was made; a workspace entry ends MaxTokenTTL after its issued_before.
// Entries that ended are dropped.
package revoke

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// DefaultMaxTokenTTL is Options.MaxTokenTTL's default: above a year, so
// that `tether up`'s one-year bridge token fits.
const DefaultMaxTokenTTL = 400 * 24 * time.Hour

// futureSkew is how far in the future an issued_before may lie: the
// clocks of the admin and the broker differ a little, and a revocation of
// tokens not issued yet would refuse them as they are issued.
const futureSkew = time.Minute

// seenExpiryMargin keeps a jti entry whose token's expiry is known a little
// past it: the Verifier accepts a token a few seconds past its exp (leeway).
const seenExpiryMargin = time.Minute

// Options configure a List.
type Options struct {
	// MaxTokenTTL is the longest lifetime of a token the broker accepts;
	// default DefaultMaxTokenTTL.
	MaxTokenTTL time.Duration
	Logger      zerolog.Logger
}

// shared is where brokers on one Redis keep the list (redis.go).
type shared interface {
	// add stores e and tells it to every broker sharing the list.
	add(ctx context.Context, e Entry) error
	// load reads every entry that has not ended.
	load(ctx context.Context) ([]Entry, error)
	close(ctx context.Context) error
}

// List is the revocation list of a broker. Its methods are safe for
// concurrent use.
type List struct {
	maxTTL time.Duration
	log    zerolog.Logger
	shared shared // nil: this broker alone

	// idx is what Revoked reads: replaced whole, under mu, on each change.
	idx atomic.Pointer[index]

	mu      sync.Mutex
	entries map[string]Entry // by Entry.key
	live    map[*liveToken]struct{}
	closed  bool

	ctx    context.Context // ended by Close: stops a resync
	cancel context.CancelFunc
	wg     sync.WaitGroup // ends of live tokens and resyncs under way
}

// index is an immutable snapshot of the entries for lookups.
type index struct {
	jti map[string]struct{}
	cut map[string]time.Time // workspace -> the latest issued_before
}

// liveToken is something live that authenticated with a token.
type liveToken struct {
	claims *auth.Claims
	end    func()
}

// New returns the list of a broker alone, in memory.
func New(opts Options) *List {
	if opts.MaxTokenTTL <= 0 {
		opts.MaxTokenTTL = DefaultMaxTokenTTL
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &List{
		maxTTL:  opts.MaxTokenTTL,
		log:     opts.Logger.With().Str("component", "revoke").Logger(),
		entries: make(map[string]Entry),
		live:    make(map[*liveToken]struct{}),
		ctx:     ctx,
		cancel:  cancel,
	}
	l.idx.Store(&index{})
	return l
}

// MaxTokenTTL is the longest token lifetime the list lets through.
func (l *List) MaxTokenTTL() time.Duration { return l.maxTTL }

// Revoked implements auth.Revocations: whether c's token is revoked, or
// lives longer than MaxTokenTTL (no revocation could outlast it).
func (l *List) Revoked(c *auth.Claims) bool {
	if c.ExpiresAt != nil {
		if c.IssuedAt != nil {
			if c.ExpiresAt.Sub(c.IssuedAt.Time) > l.maxTTL {
				return true
			}
		} else if time.Until(c.ExpiresAt.Time) > l.maxTTL {
			return true
		}
	}
	return l.idx.Load().revoked(c)
}

func (x *index) revoked(c *auth.Claims) bool {
	if _, ok := x.jti[c.ID]; ok && c.ID != "" {
		return true
	}
	if len(x.cut) == 0 {
		return false
	}
	for _, ws := range c.Workspaces {
		if cut, ok := x.cut[ws]; ok && (c.IssuedAt == nil || c.IssuedAt.Before(cut)) {
			return true
		}
	}
	return false
}

// Revoke makes the revocation r asks for, by the admin named by (its jti
// and sub, never its token): stored where the brokers share it (when they
// do), then in effect here at once. Live sockets and MCP streams that
// authenticated with a revoked token are ended (their end funcs run on
// goroutines of the list). An issued_before in the future, or so far in
// the past that every token issued before it has expired, is
// invalid_request; a list shared on Redis that cannot store the entry
// answers bus_unavailable, and nothing changed here (retrying is safe).
func (l *List) Revoke(ctx context.Context, r Request, by string) (Entry, error) {
	now := time.Now().UTC()
	e := Entry{CreatedAt: now, By: by}
	if r.JTI != "" {
		e.JTI = r.JTI
		e.ExpiresAt = now.Add(l.maxTTL)
		if exp, ok := l.seenExpiry(r.JTI); ok && exp.Before(e.ExpiresAt) {
			e.ExpiresAt = exp.UTC()
		}
	} else {
		ib := r.issuedBefore
		switch {
		case ib.IsZero():
			return Entry{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: issued_before is required with workspace_id")
		case ib.After(now.Add(futureSkew)):
			return Entry{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: issued_before is in the future")
		case !ib.Add(l.maxTTL).After(now):
			return Entry{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: issued_before is more than the maximum token lifetime (%s) ago: every token issued before it has expired", l.maxTTL)
		}
		e.WorkspaceID, e.IssuedBefore, e.ExpiresAt = r.WorkspaceID, &ib, ib.Add(l.maxTTL)
	}
	if l.shared != nil {
		if err := l.shared.add(ctx, e); err != nil {
			return Entry{}, protocol.Errorf(protocol.CodeBusUnavailable, "storing the revocation: %v", err)
		}
	}
	l.apply(e)
	return e, nil
}

// seenExpiry is the expiry of a live token with jti, if one is tracked.
func (l *List) seenExpiry(jti string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t := range l.live {
		if t.claims.ID == jti && t.claims.ExpiresAt != nil {
			return t.claims.ExpiresAt.Add(seenExpiryMargin), true
		}
	}
	return time.Time{}, false
}

// Entries lists the revocations in effect, oldest first.
func (l *List) Entries() []Entry {
	now := time.Now()
	l.mu.Lock()
	list := make([]Entry, 0, len(l.entries))
	for _, e := range l.entries {
		if e.ExpiresAt.After(now) {
			list = append(list, e)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(list, func(a, b Entry) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return list
}

// Track registers something live that authenticated with c's token: end
// is called once, on a goroutine of the list, when a revocation covers it.
// ok is false, and nothing is registered, when the token is revoked
// already. untrack, called when the thing ends by itself, forgets it.
func (l *List) Track(c *auth.Claims, end func()) (untrack func(), ok bool) {
	t := &liveToken{claims: c, end: end}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Under mu, as apply stores the index and looks at live: a revocation
	// either is in the index now or will find t.
	if l.Revoked(c) {
		return nil, false
	}
	l.live[t] = struct{}{}
	return func() {
		l.mu.Lock()
		delete(l.live, t)
		l.mu.Unlock()
	}, true
}

// apply puts entries into effect (those not ended, and new or lasting
// longer than the one of the same key), drops the entries that ended, and
// ends the live tokens the new ones cover. It does not block: the bus's
// handler calls it.
func (l *List) apply(entries ...Entry) {
	now := time.Now()
	l.mu.Lock()
	var fresh []Entry
	for _, e := range entries {
		if !e.ExpiresAt.After(now) {
			continue
		}
		k := e.key()
		if old, ok := l.entries[k]; ok && !e.ExpiresAt.After(old.ExpiresAt) {
			continue
		}
		l.entries[k] = e
		fresh = append(fresh, e)
	}
	if len(fresh) == 0 {
		l.mu.Unlock()
		return
	}
	x := &index{jti: make(map[string]struct{}), cut: make(map[string]time.Time)}
	for k, e := range l.entries {
		if !e.ExpiresAt.After(now) {
			delete(l.entries, k)
			continue
		}
		if e.JTI != "" {
			x.jti[e.JTI] = struct{}{}
		} else if cut, ok := x.cut[e.WorkspaceID]; !ok || e.IssuedBefore.After(cut) {
			x.cut[e.WorkspaceID] = *e.IssuedBefore
		}
	}
	l.idx.Store(x)
	var ends []func()
	for t := range l.live {
		for i := range fresh {
			if fresh[i].matches(t.claims) {
				ends = append(ends, t.end)
				delete(l.live, t)
				break
			}
		}
	}
	closed := l.closed
	if !closed {
		l.wg.Add(len(ends))
	}
	l.mu.Unlock()
	for _, e := range fresh {
		l.log.Info().Str("jti", e.JTI).Str("workspace_id", e.WorkspaceID).Any("issued_before", e.IssuedBefore).
			Time("expires_at", e.ExpiresAt).Str("by", e.By).Int("live_ended", len(ends)).Msg("revocation in effect")
	}
	for _, end := range ends {
		if closed {
			end()
			continue
		}
		// Each on its own: ending a socket may wait on Redis (its
		// workspace channel's unsubscribe), and every one is due now.
		go func() {
			defer l.wg.Done()
			end()
		}()
	}
}

// Resync loads the whole shared list again, on a goroutine of the list: a
// broker that lost Redis missed the entries told meanwhile. It does nothing
// for a broker alone.
func (l *List) Resync() {
	if l.shared == nil {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
		defer cancel()
		entries, err := l.shared.load(ctx)
		if err != nil {
			l.log.Warn().Err(err).Msg("reloading revocations failed; the entries told meanwhile are missing until the next reconnect")
			return
		}
		l.apply(entries...)
		l.log.Info().Int("entries", len(entries)).Msg("revocations reloaded")
	}()
}

// Close stops a resync under way, waits for the list's goroutines and
// releases its Redis connection, if any.
func (l *List) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	if l.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.shared.close(ctx)
}
