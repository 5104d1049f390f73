package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/protocol"
)

// Options configure a Verifier. A token is trusted when a key of one of
// three sources verifies it: Secret (HS256, for tokens without a kid),
// the KeysFile set (by kid) and the keys of the JWKSURLs (by kid; an
// identity provider's). With none, authentication is off.
type Options struct {
	Secret   []byte
	KeysFile string   // a JWK Set of verification keys, re-read by Reload
	JWKSURLs []string // identity providers' key sets
	// Issuers and Audiences, when set, bind the tokens verified by a JWKS
	// URL's key: iss must be one of Issuers, aud must hold one of
	// Audiences. Tokens signed by tether's own keys (Secret, KeysFile) are
	// tether's and are not asked.
	Issuers   []string
	Audiences []string
	Claims    ClaimNames
	// HTTPClient fetches the JWKS URLs (its timeout is replaced by 5 s and
	// its answers capped at MaxJWKSBody); nil: http.DefaultClient's
	// transport.
	HTTPClient *http.Client
	Logger     zerolog.Logger
}

// Verifier checks tokens. Its methods are safe for concurrent use; Close
// ends its JWKS fetches.
type Verifier struct {
	opts   Options
	secret []byte
	file   atomic.Pointer[keySet] // the KeysFile's keys; nil without one
	remote remotes
	parser *jwt.Parser

	// gen counts the key sets: each reload of the file and each fetch of a
	// JWKS URL adds one. A cached token verified under an older generation
	// is verified again, so one whose key went is refused from then on.
	gen atomic.Uint64

	// cache holds tokens already verified, so a caller's every request does
	// not pay for the signature and JSON again. Entries end with the token's
	// expiry or the key generation; the map is dropped whole when it grows
	// past cacheMax.
	mu    sync.Mutex
	cache map[string]cached

	// revoked, when set, is asked on every Verify, cached token or not.
	revoked Revocations
	// unchecked, when set, hears every Verify let in while authentication
	// is off (insecure.go).
	unchecked func(role, workspaceID string)
}

// cached is a verified token: its claims, the key generation it was
// verified under, and whether an identity provider's key signed it.
type cached struct {
	claims *Claims
	gen    uint64
	remote bool
}

// Revocations tells whether a verified token has been revoked. Revoked is
// called on every Verify, so it must be cheap (a map lookup) and safe for
// concurrent use.
type Revocations interface {
	Revoked(c *Claims) bool
}

// SetRevocations makes v refuse the tokens r says are revoked. Call it
// before v is in use.
func (a *Verifier) SetRevocations(r Revocations) { a.revoked = r }

const cacheMax = 4096

// NewVerifier returns a Verifier of HS256 tokens signed with secret; empty
// turns authentication off.
func NewVerifier(secret []byte) *Verifier {
	v, _ := New(Options{Secret: secret}) // no file, no URL: cannot fail
	return v
}

// New returns a Verifier of opts' keys. It reads KeysFile (an error if it
// is unreadable or not a key set) and starts fetching the JWKS URLs in the
// background: Ready says when each was fetched once.
func New(opts Options) (*Verifier, error) {
	if opts.Claims.Role == "" {
		opts.Claims.Role = "role"
	}
	if opts.Claims.Workspaces == "" {
		opts.Claims.Workspaces = "workspaces"
	}
	a := &Verifier{
		opts:   opts,
		secret: opts.Secret,
		// The four algorithms of the four kinds of key: "none" and every
		// other alg are refused before a key is looked up.
		parser: jwt.NewParser(jwt.WithValidMethods(validAlgs), jwt.WithExpirationRequired(), jwt.WithLeeway(5*time.Second)),
	}
	if opts.KeysFile != "" {
		ks, err := loadKeyFile(opts.KeysFile)
		if err != nil {
			return nil, err
		}
		a.file.Store(ks)
	}
	for _, u := range opts.JWKSURLs {
		if pu, err := url.ParseRequestURI(u); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
			return nil, fmt.Errorf("JWKS URL %q: want an http or https URL", u)
		}
	}
	if len(opts.JWKSURLs) > 0 {
		base := opts.HTTPClient
		if base == nil {
			base = &http.Client{}
		}
		ctx, cancel := context.WithCancel(context.Background())
		a.remote.cancel = cancel
		for _, u := range opts.JWKSURLs {
			r := newRemote(u, base, opts.Logger, a.keysChanged)
			a.remote.list = append(a.remote.list, r)
			a.remote.wg.Go(func() { r.run(ctx) })
		}
	}
	return a, nil
}

// Close stops fetching the JWKS URLs and waits for the fetches to end.
func (a *Verifier) Close() {
	if a.remote.cancel != nil {
		a.remote.cancel()
		a.remote.wg.Wait()
	}
}

// Reload reads the KeysFile again. A file that cannot be read or is not a
// key set is an error, and the keys before stay. Tokens verified under the
// old keys are verified again on their next use; established connections
// are not the Verifier's, and stay.
func (a *Verifier) Reload() (keys int, err error) {
	if a.opts.KeysFile == "" {
		return 0, nil
	}
	ks, err := loadKeyFile(a.opts.KeysFile)
	if err != nil {
		return 0, err
	}
	a.file.Store(ks)
	a.keysChanged()
	return ks.n, nil
}

// keysChanged starts a new key generation and drops the verified tokens.
func (a *Verifier) keysChanged() {
	a.gen.Add(1)
	a.mu.Lock()
	a.cache = nil
	a.mu.Unlock()
}

// Ready is nil once every JWKS URL was fetched once; before, it names the
// first one not fetched yet, and why.
func (a *Verifier) Ready() error {
	for _, r := range a.remote.list {
		if err := r.ready(); err != nil {
			return err
		}
	}
	return nil
}

// Enabled reports whether tokens are checked: the Verifier has a secret,
// a key file or a JWKS URL.
func (a *Verifier) Enabled() bool {
	return len(a.secret) > 0 || a.opts.KeysFile != "" || len(a.remote.list) > 0
}

// Verify checks token for role and workspaceID ("" for any). It returns a *protocol.Error
// with CodeUnauthorized (bad token) or CodeForbidden (valid token, wrong role
// or workspace). With a refusal of a token whose signature is good
// (revoked, wrong role or workspace) the token's claims come back too, for
// the audit log to name who was refused: act on them only when err is nil.
func (a *Verifier) Verify(token, role, workspaceID string) (*Claims, error) {
	return a.VerifyFor(token, role, workspaceID, "")
}

// VerifyFor is Verify at a door that is a resource of its own (the MCP
// endpoint, RFC 9728): a token from an identity provider is accepted when
// its audience is resource or one of Options.Audiences.
func (a *Verifier) VerifyFor(token, role, workspaceID, resource string) (*Claims, error) {
	if !a.Enabled() {
		if a.unchecked != nil {
			a.unchecked(role, workspaceID)
		}
		return &Claims{Role: role, Workspaces: []string{AnyWorkspace}}, nil
	}
	if token == "" {
		return nil, protocol.Errorf(protocol.CodeUnauthorized, "missing token")
	}
	c, err := a.parse(token)
	if err != nil {
		return nil, err
	}
	if c.remote {
		if err := a.audienceFits(c.claims, resource); err != nil {
			return nil, err
		}
	}
	claims := c.claims
	// A token with a good signature that is refused all the same comes
	// back with its claims, so that the audit log names who was refused.
	if a.revoked != nil && a.revoked.Revoked(claims) {
		return claims, ErrRevoked()
	}
	if claims.Role != role {
		return claims, protocol.Errorf(protocol.CodeForbidden, "token role %q cannot act as %s", claims.Role, role)
	}
	if workspaceID != "" && !claims.Allows(workspaceID) {
		return claims, protocol.Errorf(protocol.CodeForbidden, "token does not cover workspace %q", workspaceID)
	}
	return claims, nil
}

// audienceFits checks an identity provider's token's aud against the
// door's resource and the configured audiences; with neither, aud is not
// asked.
func (a *Verifier) audienceFits(c *Claims, resource string) error {
	want := a.opts.Audiences
	if resource != "" {
		want = append(want[:len(want):len(want)], resource)
	}
	if len(want) == 0 {
		return nil
	}
	for _, aud := range c.Audience {
		if slices.Contains(want, aud) {
			return nil
		}
	}
	return protocol.Errorf(protocol.CodeUnauthorized, "invalid token: wrong audience")
}

// keyError is why no key verifies a token (unknown kid, a key of another
// alg); its text is the reason a 401 gives.
type keyError struct{ msg string }

func (e *keyError) Error() string { return e.msg }

// parse verifies a token's signature, expiry and issuer, through the cache.
func (a *Verifier) parse(token string) (cached, error) {
	now := time.Now()
	gen := a.gen.Load()
	a.mu.Lock()
	c, ok := a.cache[token]
	a.mu.Unlock()
	if ok && c.gen == gen && now.Before(c.claims.ExpiresAt.Time) {
		return c, nil
	}
	var remote bool
	mc := jwt.MapClaims{}
	tok, err := a.parser.ParseWithClaims(token, mc, func(t *jwt.Token) (any, error) {
		k, r, err := a.keyFor(t)
		remote = r
		return k, err
	})
	if err != nil {
		return cached{}, protocol.Errorf(protocol.CodeUnauthorized, "invalid token: %s", reason(err))
	}
	claims, err := claimsOf(mc, a.opts.Claims)
	if err != nil {
		return cached{}, protocol.Errorf(protocol.CodeUnauthorized, "invalid token: %v", err)
	}
	claims.KeyID, _ = tok.Header["kid"].(string)
	if remote && len(a.opts.Issuers) > 0 && !slices.Contains(a.opts.Issuers, claims.Issuer) {
		return cached{}, protocol.Errorf(protocol.CodeUnauthorized, "invalid token: wrong issuer")
	}
	c = cached{claims: claims, gen: gen, remote: remote}
	a.mu.Lock()
	if a.cache == nil || len(a.cache) >= cacheMax {
		a.cache = make(map[string]cached)
	}
	a.cache[token] = c
	a.mu.Unlock()
	return c, nil
}

// reason is the short why of a refused token; never the token itself.
func reason(err error) string {
	var ke *keyError
	switch {
	case errors.As(err, &ke):
		return ke.msg
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return "token not valid yet"
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token used before issued"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "token has no expiry (exp)"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return err.Error() // "token signature is invalid: signing method none is invalid" and the like
	}
	return err.Error()
}

// maxKIDShown bounds how much of a made-up kid a refusal repeats.
const maxKIDShown = 64

// keyFor picks the key of a token: its kid's, or the secret for a token
// without a kid. remote tells whether an identity provider's key it is.
func (a *Verifier) keyFor(t *jwt.Token) (key any, remote bool, err error) {
	alg := t.Method.Alg()
	kv, has := t.Header["kid"]
	if !has {
		if len(a.secret) == 0 {
			return nil, false, &keyError{"token has no key id (kid)"}
		}
		if alg != AlgHS256 {
			return nil, false, &keyError{fmt.Sprintf("a token without kid is HS256, this one is %s", alg)}
		}
		return a.secret, false, nil
	}
	kid, ok := kv.(string)
	if !ok {
		return nil, false, &keyError{"key id (kid) is not a string"}
	}
	if ks := a.file.Load(); ks != nil {
		if k, found, err := ks.lookup(t); found {
			return k, false, wrapKeyErr(kid, err)
		}
	}
	for _, refresh := range []bool{false, true} {
		for _, r := range a.remote.list {
			if k, found, err := r.lookup(t, refresh); found {
				return k, true, wrapKeyErr(kid, err)
			}
		}
	}
	if len(kid) > maxKIDShown {
		kid = kid[:maxKIDShown] + "…"
	}
	return nil, false, &keyError{fmt.Sprintf("unknown key id %q", kid)}
}

func wrapKeyErr(kid string, err error) error {
	if err == nil {
		return nil
	}
	if len(kid) > maxKIDShown {
		kid = kid[:maxKIDShown] + "…"
	}
	return &keyError{fmt.Sprintf("key %q: %v", kid, err)}
}
