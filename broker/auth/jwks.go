package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// The keys of an identity provider, fetched from its JWKS URL (an OIDC
// provider's jwks_uri) by jwkset's HTTP storage and looked up by keyfunc.
const (
	// MaxJWKSBody caps a JWKS answer: a key set is a few KiB, and a huge
	// answer must not cost the broker its memory.
	MaxJWKSBody = 1 << 20
	// jwksRefreshEvery bounds refreshes on an unknown kid, per URL: a flood
	// of tokens with made-up kids costs the provider one request per 10 s.
	jwksRefreshEvery = 10 * time.Second
	// jwksRefreshInterval refreshes a set in the background, so removed keys
	// go within the hour even when no unknown kid asks.
	jwksRefreshInterval = time.Hour
	// jwksFetchTimeout bounds one fetch; a refresh on an unknown kid waits
	// for it.
	jwksFetchTimeout = 5 * time.Second
	// jwksRetryMax is the longest wait between tries of a URL whose first
	// fetch has not succeeded yet (the broker is not ready until it has).
	jwksRetryMax = 5 * time.Second
)

// remote is the keys of one JWKS URL. Safe for concurrent use.
type remote struct {
	url     string
	client  *http.Client
	log     zerolog.Logger
	changed func() // a fetch replaced the keys: verified tokens are checked again

	limiter *rate.Limiter
	keys    atomic.Pointer[remoteKeys] // nil until the first fetch succeeded
	lastErr atomic.Pointer[error]
}

// remoteKeys are the two views of one URL's storage: cached reads only
// what was fetched; refreshing fetches again before it says "not found".
type remoteKeys struct {
	cached, refreshing keyfunc.Keyfunc
	stop               context.CancelFunc // ends the storage's refresh goroutine (the Verifier's Close does too)
}

// guardedStore is the memory storage under a URL's HTTP storage: it
// refuses a fetch that brought no usable key (an answer that is not a key
// set), so the keys fetched before stay, and drops oct keys (a secret
// published in a JWKS is no secret).
type guardedStore struct {
	*jwkset.MemoryJWKSet
	onReplace func()
}

func (g guardedStore) KeyReplaceAll(ctx context.Context, given []jwkset.JWK) error {
	keep := given[:0:0]
	for _, k := range given {
		if k.Marshal().KTY == jwkset.KtyOct {
			continue
		}
		if _, err := checkJWK(k); err != nil {
			continue // a key of a kind tether does not verify: not ours to use
		}
		keep = append(keep, k)
	}
	if len(keep) == 0 {
		return errors.New("answer has no usable key (EdDSA, ES256 or RS256 with a kid): keys fetched before kept")
	}
	if err := g.MemoryJWKSet.KeyReplaceAll(ctx, keep); err != nil {
		return err
	}
	g.onReplace()
	return nil
}

// capTransport caps the body of every answer at MaxJWKSBody: reading past
// it fails the fetch, and the keys fetched before stay.
type capTransport struct{ base http.RoundTripper }

func (c capTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > MaxJWKSBody {
		resp.Body.Close()
		return nil, fmt.Errorf("JWKS answer of %d bytes is over the %d-byte cap", resp.ContentLength, MaxJWKSBody)
	}
	resp.Body = http.MaxBytesReader(nil, resp.Body, MaxJWKSBody)
	return resp, nil
}

func newRemote(url string, base *http.Client, log zerolog.Logger, changed func()) *remote {
	c := *base
	tr := c.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	c.Transport = capTransport{tr}
	c.Timeout = jwksFetchTimeout
	return &remote{url: url, client: &c, log: log, changed: changed, limiter: rate.NewLimiter(rate.Every(jwksRefreshEvery), 1)}
}

// run fetches the URL until a first fetch succeeds, then leaves the
// storage's own goroutine (ended by ctx) to refresh it hourly.
func (r *remote) run(ctx context.Context) {
	wait := 250 * time.Millisecond
	for {
		if err := r.start(ctx); err == nil {
			return
		} else {
			r.lastErr.Store(&err)
			r.log.Warn().Err(err).Str("jwks_url", r.url).Msg("fetching JWKS failed; retrying")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, jwksRetryMax)
	}
}

// start makes the URL's storage with a first fetch; on failure the
// storage and its refresh goroutine go.
func (r *remote) start(parent context.Context) error {
	ctx, cancel := context.WithCancel(parent)
	st, err := jwkset.NewStorageFromHTTP(r.url, jwkset.HTTPClientStorageOptions{
		Client:          r.client,
		Ctx:             ctx,
		HTTPTimeout:     jwksFetchTimeout,
		RefreshInterval: jwksRefreshInterval,
		RefreshErrorHandler: func(_ context.Context, err error) {
			r.log.Warn().Err(err).Str("jwks_url", r.url).Msg("refreshing JWKS failed; keys fetched before kept")
		},
		Storage: guardedStore{MemoryJWKSet: jwkset.NewMemoryStorage(), onReplace: r.changed},
	})
	if err != nil {
		cancel()
		return err
	}
	// The refreshing view: jwkset refreshes on an unknown kid; the rate
	// is r.limiter's, asked before this view is, so its own never waits.
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{r.url: st},
		RateLimitWaitMax:  jwksFetchTimeout,
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
	})
	if err != nil {
		cancel()
		return err
	}
	cached, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: st, UseWhitelist: sigUse})
	if err != nil {
		cancel()
		return err
	}
	refreshing, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: client, UseWhitelist: sigUse})
	if err != nil {
		cancel()
		return err
	}
	r.keys.Store(&remoteKeys{cached: cached, refreshing: refreshing, stop: cancel})
	r.log.Info().Str("jwks_url", r.url).Msg("JWKS fetched")
	return nil
}

// ready is nil once the first fetch succeeded.
func (r *remote) ready() error {
	if r.keys.Load() != nil {
		return nil
	}
	if e := r.lastErr.Load(); e != nil {
		return fmt.Errorf("JWKS %s not fetched yet: %w", r.url, *e)
	}
	return fmt.Errorf("JWKS %s not fetched yet", r.url)
}

// lookup finds t's key among the keys fetched; with refresh, and when the
// URL's rate allows, it fetches again first if the kid is unknown.
func (r *remote) lookup(t *jwt.Token, refresh bool) (key any, found bool, err error) {
	ks := r.keys.Load()
	if ks == nil {
		return nil, false, nil
	}
	kf := ks.cached
	if refresh {
		if !r.limiter.Allow() {
			return nil, false, nil
		}
		kf = ks.refreshing
	}
	k, err := kf.Keyfunc(t)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, errors.New("key may not verify this token (its alg or use differs)")
	}
	return k, true, fitAlg(k, t.Method.Alg())
}

// remotes are the JWKS URLs of a Verifier and the goroutines fetching them.
type remotes struct {
	list   []*remote
	cancel context.CancelFunc
	wg     sync.WaitGroup
}
