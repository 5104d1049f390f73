package revoke

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/protocol"
)

// TestMain fails the run on a goroutine left behind: a list's ends and
// resyncs, a shared list's Redis connections.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// conformance runs f on a list alone (New) and on one shared on a Redis
// server (NewShared): both keep the same promises.
func conformance(t *testing.T, opts Options, f func(t *testing.T, l *List)) {
	t.Run("memory", func(t *testing.T) {
		l := New(opts)
		defer l.Close()
		f(t, l)
	})
	t.Run("redis", func(t *testing.T) {
		e := &sharedEnv{t: t, url: redistest.Start(t).URL(), prefix: redistest.Prefix(t), opts: opts}
		f(t, e.list())
	})
}

func claims(jti string, iat time.Time, ttl time.Duration, ws ...string) *auth.Claims {
	return &auth.Claims{Role: auth.RoleBridge, Workspaces: ws, RegisteredClaims: jwt.RegisteredClaims{
		ID: jti, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(iat.Add(ttl)),
	}}
}

func mustDecode(t *testing.T, body string) Request {
	t.Helper()
	r, err := DecodeRequest([]byte(body))
	if err != nil {
		t.Fatalf("DecodeRequest(%s): %v", body, err)
	}
	return r
}

func TestRevokedByJTIRefusesThatTokenOnly(t *testing.T) {
	conformance(t, Options{}, revokedByJTIRefusesThatTokenOnly)
}

func revokedByJTIRefusesThatTokenOnly(t *testing.T, l *List) {
	now := time.Now()
	a, b := claims("a", now, time.Hour, "w"), claims("b", now, time.Hour, "w")
	if l.Revoked(a) || l.Revoked(b) {
		t.Fatal("a token is revoked before any revocation")
	}
	e, err := l.Revoke(context.Background(), mustDecode(t, `{"jti":"a"}`), "jti:admin")
	if err != nil {
		t.Fatal(err)
	}
	if !l.Revoked(a) || l.Revoked(b) {
		t.Fatalf("after revoking jti a: a revoked %v (want true), b revoked %v (want false)", l.Revoked(a), l.Revoked(b))
	}
	if e.JTI != "a" || e.By != "jti:admin" || e.CreatedAt.IsZero() {
		t.Fatalf("entry = %+v", e)
	}
	// An unseen token's entry lasts the longest lifetime a token may have.
	if got := e.ExpiresAt.Sub(e.CreatedAt); got != DefaultMaxTokenTTL {
		t.Fatalf("jti entry lasts %s, want %s", got, DefaultMaxTokenTTL)
	}
}

func TestRevokedByWorkspaceIssuedBeforeRefusesOlderTokensOfThatWorkspace(t *testing.T) {
	conformance(t, Options{}, revokedByWorkspaceIssuedBeforeRefusesOlderTokensOfThatWorkspace)
}

func revokedByWorkspaceIssuedBeforeRefusesOlderTokensOfThatWorkspace(t *testing.T, l *List) {
	now := time.Now().Truncate(time.Second)
	cut := now.Add(-10 * time.Second)
	older := claims("old", cut.Add(-time.Minute), time.Hour, "w", "x")
	newer := claims("new", cut.Add(time.Second), time.Hour, "w")
	other := claims("other", cut.Add(-time.Minute), time.Hour, "x")
	any := claims("any", cut.Add(-time.Minute), time.Hour, auth.AnyWorkspace)
	noIAT := claims("noiat", now, time.Hour, "w")
	noIAT.IssuedAt = nil
	e, err := l.Revoke(context.Background(), mustDecode(t, `{"workspace_id":"w","issued_before":"`+cut.Format(time.RFC3339)+`"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    *auth.Claims
		want bool
	}{{older, true}, {newer, false}, {other, false}, {any, false}, {noIAT, true}} {
		if got := l.Revoked(tc.c); got != tc.want {
			t.Errorf("token %s (workspaces %v): revoked %v, want %v", tc.c.ID, tc.c.Workspaces, got, tc.want)
		}
	}
	if !e.ExpiresAt.Equal(cut.Add(DefaultMaxTokenTTL)) {
		t.Fatalf("workspace entry ends %s, want issued_before + max TTL %s", e.ExpiresAt, cut.Add(DefaultMaxTokenTTL))
	}
}

func TestRevokedRefusesATokenLivingLongerThanTheMaximum(t *testing.T) {
	conformance(t, Options{MaxTokenTTL: time.Hour}, revokedRefusesATokenLivingLongerThanTheMaximum)
}

func revokedRefusesATokenLivingLongerThanTheMaximum(t *testing.T, l *List) {
	now := time.Now()
	if l.Revoked(claims("ok", now, time.Hour, "w")) {
		t.Fatal("a token of exactly the maximum lifetime is refused")
	}
	if !l.Revoked(claims("long", now, time.Hour+time.Second, "w")) {
		t.Fatal("a token living past the maximum is accepted: a revocation could end before it does")
	}
	noIAT := claims("noiat", now, 2*time.Hour, "w")
	noIAT.IssuedAt = nil
	if !l.Revoked(noIAT) {
		t.Fatal("a token without iat expiring past now + the maximum is accepted")
	}
}

func TestEntriesThatEndedAreDropped(t *testing.T) {
	synctest.Test(t, entriesThatEndedAreDropped)
}

func entriesThatEndedAreDropped(t *testing.T) {
	l := New(Options{MaxTokenTTL: time.Hour})
	defer l.Close()
	now := time.Now()
	ib := now.Add(-2 * time.Hour)
	l.apply(
		Entry{JTI: "gone", CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Second)},
		Entry{WorkspaceID: "w", IssuedBefore: &ib, CreatedAt: ib, ExpiresAt: now.Add(-time.Second)},
		Entry{JTI: "kept", CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
	)
	list := l.Entries()
	if len(list) != 1 || list[0].JTI != "kept" {
		t.Fatalf("entries = %+v, want only jti kept", list)
	}
	if l.Revoked(claims("gone", now.Add(-30*time.Minute), time.Hour, "w")) {
		t.Fatal("an ended entry still revokes")
	}
	// An entry that is in effect and then ends is dropped at the next change.
	l.apply(Entry{JTI: "short", CreatedAt: now, ExpiresAt: now.Add(50 * time.Millisecond)})
	time.Sleep(60 * time.Millisecond) // the bubble's clock: the entry's end passes
	l.apply(Entry{JTI: "later", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
	l.mu.Lock()
	_, still := l.entries["jti:short"]
	l.mu.Unlock()
	if still || l.Revoked(claims("short", now, time.Minute, "w")) {
		t.Fatal("an entry past its end is kept")
	}
}

func TestRevokeRefusesIssuedBeforeInTheFutureOrLongPast(t *testing.T) {
	conformance(t, Options{MaxTokenTTL: time.Hour}, revokeRefusesIssuedBeforeInTheFutureOrLongPast)
}

func revokeRefusesIssuedBeforeInTheFutureOrLongPast(t *testing.T, l *List) {
	for _, ib := range []time.Time{time.Now().Add(time.Hour), time.Now().Add(-2 * time.Hour)} {
		_, err := l.Revoke(context.Background(), mustDecode(t, `{"workspace_id":"w","issued_before":"`+ib.Format(time.RFC3339)+`"}`), "")
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Code != protocol.CodeInvalidRequest {
			t.Errorf("issued_before %s: err = %v, want invalid_request", ib, err)
		}
	}
	if n := len(l.Entries()); n != 0 {
		t.Fatalf("%d entries after refused requests", n)
	}
}

func TestTrackEndsTheLiveTokensARevocationCovers(t *testing.T) {
	conformance(t, Options{}, trackEndsTheLiveTokensARevocationCovers)
}

func trackEndsTheLiveTokensARevocationCovers(t *testing.T, l *List) {
	now := time.Now()
	ended := make(chan string, 3)
	track := func(c *auth.Claims) func() {
		untrack, ok := l.Track(c, func() { ended <- c.ID })
		if !ok {
			t.Fatalf("Track(%s) refused a good token", c.ID)
		}
		return untrack
	}
	track(claims("a", now, 2*time.Hour, "w"))
	track(claims("b", now, time.Hour, "w"))
	untrackC := track(claims("c", now, time.Hour, "w"))
	untrackC() // ended by itself: a revocation does not reach it
	e, err := l.Revoke(context.Background(), mustDecode(t, `{"jti":"a"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := <-ended; got != "a" {
		t.Fatalf("ended %s, want a", got)
	}
	// A live token's expiry is known: its entry ends with it (plus a margin).
	if want := now.Add(2 * time.Hour).Truncate(time.Second).Add(seenExpiryMargin); !e.ExpiresAt.Equal(want) {
		t.Fatalf("entry of a seen token ends %s, want %s", e.ExpiresAt, want)
	}
	if _, err := l.Revoke(context.Background(), mustDecode(t, `{"workspace_id":"w","issued_before":"`+now.Add(time.Second).Format(time.RFC3339)+`"}`), ""); err != nil {
		t.Fatal(err)
	}
	if got := <-ended; got != "b" {
		t.Fatalf("ended %s, want b", got)
	}
	select {
	case got := <-ended:
		t.Fatalf("ended %s, which was untracked or ended already", got)
	default:
	}
	if _, ok := l.Track(claims("a", now, time.Hour, "x"), func() {}); ok {
		t.Fatal("Track took a revoked token")
	}
}
