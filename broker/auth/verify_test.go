package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// testKey is a generated key: its private JWK signs, its public JWK goes
// into a key set.
type testKey struct {
	priv, pub jwkset.JWKMarshal
	signing   auth.SigningKey
}

func newTestKey(t testing.TB, alg, kid string) testKey {
	t.Helper()
	priv, pub, err := auth.GenerateKey(alg, kid)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "priv.json")
	writeJSON(t, p, priv)
	sk, err := auth.LoadSigningKey(p, kid)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv: priv, pub: pub, signing: sk}
}

func writeJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeSet(t testing.TB, path string, keys ...testKey) {
	t.Helper()
	set := jwkset.JWKSMarshal{}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.pub)
	}
	writeJSON(t, path, set)
}

func issue(t testing.TB, k testKey, role string, ws ...string) string {
	t.Helper()
	is, err := auth.Issue(k.signing, role, ws, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return is.Token
}

// signed signs claims with k as is (for the bad-input cases Issue refuses).
func signed(t testing.TB, k testKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.signing.Alg), claims)
	tok.Header["kid"] = k.signing.KID
	s, err := tok.SignedString(k.signing.Key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// wantRefused checks err is unauthorized with msg in its message, and that
// the token is not in it.
func wantRefused(t *testing.T, err error, token, msg string) {
	t.Helper()
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeUnauthorized {
		t.Fatalf("want unauthorized, got %v", err)
	}
	if !strings.Contains(pe.Message, msg) {
		t.Fatalf("message %q does not say %q", pe.Message, msg)
	}
	if token != "" && strings.Contains(pe.Message, token) {
		t.Fatalf("message echoes the token")
	}
}

func TestKeysFileTwoKidsAndReloadWithoutOne(t *testing.T) {
	k1, k2 := newTestKey(t, auth.AlgEdDSA, "k1"), newTestKey(t, auth.AlgES256, "k2")
	path := filepath.Join(t.TempDir(), "keys.json")
	writeSet(t, path, k1, k2)
	v, err := auth.New(auth.Options{KeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	t1, t2 := issue(t, k1, auth.RoleCaller, "w"), issue(t, k2, auth.RoleCaller, "w")
	for _, tok := range []string{t1, t2} {
		if _, err := v.Verify(tok, auth.RoleCaller, "w"); err != nil {
			t.Fatal(err)
		}
	}
	writeSet(t, path, k2)
	if n, err := v.Reload(); err != nil || n != 1 {
		t.Fatalf("reload: %d keys, %v", n, err)
	}
	_, err = v.Verify(t1, auth.RoleCaller, "w") // cached before: verified again
	wantRefused(t, err, t1, `unknown key id "k1"`)
	if _, err := v.Verify(t2, auth.RoleCaller, "w"); err != nil {
		t.Fatal(err)
	}
	// A malformed file on reload: an error, and the keys before stay.
	if err := os.WriteFile(path, []byte(`{"keys":[{"kty":"oct"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Reload(); err == nil {
		t.Fatal("malformed key file reloaded")
	}
	if _, err := v.Verify(t2, auth.RoleCaller, "w"); err != nil {
		t.Fatalf("keys lost by a failed reload: %v", err)
	}
}

func TestKeysFileRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty set":   `{"keys":[]}`,
		"not json":    `keys`,
		"no kid":      `{"keys":[{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0"}]}`,
		"wrong alg":   `{"keys":[{"kty":"oct","kid":"a","alg":"RS256","k":"c2VjcmV0c2VjcmV0c2VjcmV0"}]}`,
		"twice a kid": `{"keys":[{"kty":"oct","kid":"a","k":"c2VjcmV0"},{"kty":"oct","kid":"a","k":"c2VjcmV1"}]}`,
	} {
		p := filepath.Join(dir, "k.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := auth.New(auth.Options{KeysFile: p}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestEveryAlgSignsAndVerifies(t *testing.T) {
	var keys []testKey
	for _, alg := range []string{auth.AlgHS256, auth.AlgEdDSA, auth.AlgES256, auth.AlgRS256} {
		keys = append(keys, newTestKey(t, alg, "kid-"+alg))
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	writeSet(t, path, keys...)
	v, err := auth.New(auth.Options{KeysFile: path, Secret: []byte("plain-secret")})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, err := v.Verify(issue(t, k, auth.RoleBridge, "w"), auth.RoleBridge, "w"); err != nil {
			t.Errorf("%s: %v", k.signing.Alg, err)
		}
	}
	// --secret stays the key of tokens without kid.
	tok, _ := auth.IssueToken([]byte("plain-secret"), auth.RoleCaller, []string{"w"}, time.Hour)
	if _, err := v.Verify(tok, auth.RoleCaller, "w"); err != nil {
		t.Fatal(err)
	}
}

func TestBadTokensAreRefusedWithTheirReason(t *testing.T) {
	k := newTestKey(t, auth.AlgES256, "k")
	path := filepath.Join(t.TempDir(), "keys.json")
	writeSet(t, path, k)
	v, err := auth.New(auth.Options{KeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	base := func() jwt.MapClaims {
		return jwt.MapClaims{"role": "caller", "workspaces": []string{"w"}, "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	}
	expired := base()
	expired["exp"] = now.Add(-time.Minute).Unix()
	early := base()
	early["nbf"] = now.Add(time.Hour).Unix()
	noExp := base()
	delete(noExp, "exp")
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, base()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	unknown := newTestKey(t, auth.AlgES256, "k9")
	for _, c := range []struct{ name, token, reason string }{
		{"expired", signed(t, k, expired), "token expired"},
		{"not yet valid", signed(t, k, early), "token not valid yet"},
		{"no exp", signed(t, k, noExp), "no expiry"},
		{"alg none", none, "signing method none is invalid"},
		{"unknown kid", signed(t, unknown, base()), `unknown key id "k9"`},
		{"garbage", "a.b.c", "malformed token"},
	} {
		_, err := v.Verify(c.token, auth.RoleCaller, "w")
		wantRefused(t, err, c.token, c.reason)
	}
}

// An RSA public key is public: a token that uses it as an HS256 secret
// must not verify.
func TestKeyVerifiesOnlyItsOwnAlg(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, pub, err := auth.JWKOf(rk, auth.AlgRS256, "r")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keys.json")
	writeJSON(t, path, jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{pub}})
	v, err := auth.New(auth.Options{KeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"role": "caller", "workspaces": "w", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "r"
	s, _ := tok.SignedString(der)
	_, err = v.Verify(s, auth.RoleCaller, "w")
	wantRefused(t, err, s, `key "r"`)
}

// jwksServer serves a key set that a test can change, or take down.
type jwksServer struct {
	*httptest.Server
	mu   sync.Mutex
	body []byte
	down bool
	hits int
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.hits++
		if s.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(body []byte, down bool) {
	s.mu.Lock()
	s.body, s.down = body, down
	s.mu.Unlock()
}

func setOf(keys ...testKey) []byte {
	set := jwkset.JWKSMarshal{}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.pub)
	}
	b, _ := json.Marshal(set)
	return b
}

func TestJWKSRotationOutageAndBadAnswers(t *testing.T) {
	k1, k2 := newTestKey(t, auth.AlgEdDSA, "a1"), newTestKey(t, auth.AlgRS256, "a2")
	srv := newJWKSServer(t)
	srv.set(nil, true)
	v, err := auth.New(auth.Options{JWKSURLs: []string{srv.URL}, Issuers: []string{"https://idp"}, Audiences: []string{"tether"}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.Ready(); err == nil || !strings.Contains(err.Error(), "not fetched yet") {
		t.Fatalf("ready before the first fetch: %v", err)
	}
	srv.set(setOf(k1), false)
	testwait.Until(t, 10*time.Second, func() bool { return v.Ready() == nil }, "first JWKS fetch")

	claims := func(aud, iss string) jwt.MapClaims {
		return jwt.MapClaims{"role": "caller", "workspaces": "w x", "aud": aud, "iss": iss, "exp": time.Now().Add(time.Hour).Unix()}
	}
	t1 := signed(t, k1, claims("tether", "https://idp"))
	c, err := v.Verify(t1, auth.RoleCaller, "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Workspaces) != 2 {
		t.Fatalf("workspaces from a space-separated claim: %q", c.Workspaces)
	}
	wrongIss := signed(t, k1, claims("tether", "https://other"))
	_, err = v.Verify(wrongIss, auth.RoleCaller, "w")
	wantRefused(t, err, wrongIss, "wrong issuer")
	wrongAud := signed(t, k1, claims("else", "https://idp"))
	_, err = v.Verify(wrongAud, auth.RoleCaller, "w")
	wantRefused(t, err, wrongAud, "wrong audience")
	// The resource of the door is an audience too (the MCP endpoint).
	if _, err := v.VerifyFor(wrongAud, auth.RoleCaller, "w", "else"); err != nil {
		t.Fatal(err)
	}

	// The provider rotates: a token of the new kid is accepted after the
	// refresh that its unknown kid starts.
	srv.set(setOf(k1, k2), false)
	t2 := signed(t, k2, claims("tether", "https://idp"))
	if _, err := v.Verify(t2, auth.RoleCaller, "w"); err != nil {
		t.Fatalf("new kid after rotation: %v", err)
	}
	// An answer that is not a key set, or is huge: refused, keys kept.
	srv.set([]byte(`{"hello":"world"}`), false)
	// Another unknown kid within 10 s does not fetch again.
	srv.mu.Lock()
	hits := srv.hits
	srv.mu.Unlock()
	t3 := signed(t, newTestKey(t, auth.AlgEdDSA, "a3"), claims("tether", "https://idp"))
	_, err = v.Verify(t3, auth.RoleCaller, "w")
	wantRefused(t, err, t3, `unknown key id "a3"`)
	srv.mu.Lock()
	if srv.hits != hits {
		t.Fatalf("an unknown kid within 10 s of a refresh fetched again")
	}
	srv.mu.Unlock()
	// Down: keys fetched before still verify.
	srv.set(nil, true)
	for _, tok := range []string{t1, t2} {
		if _, err := v.Verify(tok, auth.RoleCaller, "w"); err != nil {
			t.Fatalf("cached keys while the URL is down: %v", err)
		}
	}
}

func TestWorkspacesClaimForms(t *testing.T) {
	k := newTestKey(t, auth.AlgHS256, "h")
	path := filepath.Join(t.TempDir(), "keys.json")
	writeSet(t, path, k)
	v, err := auth.New(auth.Options{KeysFile: path, Claims: auth.ClaimNames{Role: "tether_role", Workspaces: "scope"}})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Unix()
	for _, ws := range []any{"a,b", "a b", []string{"a", "b"}} {
		tok := signed(t, k, jwt.MapClaims{"tether_role": "caller", "scope": ws, "exp": exp})
		if _, err := v.Verify(tok, auth.RoleCaller, "b"); err != nil {
			t.Errorf("%v: %v", ws, err)
		}
	}
	bad := signed(t, k, jwt.MapClaims{"tether_role": "caller", "scope": 7, "exp": exp})
	_, err = v.Verify(bad, auth.RoleCaller, "b")
	wantRefused(t, err, bad, `claim "scope"`)
}

func TestJWKSAnswerNotAKeySetOrHugeIsRefused(t *testing.T) {
	huge := append([]byte(`{"keys":[`), []byte(strings.Repeat(" ", auth.MaxJWKSBody))...)
	for name, body := range map[string][]byte{
		"not a key set": []byte(`{"hello":"world"}`),
		"an array":      []byte(`[1,2]`),
		"only oct keys": []byte(`{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}`),
		"huge":          huge,
	} {
		srv := newJWKSServer(t)
		srv.set(body, false)
		v, err := auth.New(auth.Options{JWKSURLs: []string{srv.URL}})
		if err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 5*time.Second, func() bool {
			err := v.Ready()
			return err != nil && strings.Contains(err.Error(), ": ") // the reason of a failed fetch
		}, "a failed first fetch")
		v.Close()
		t.Logf("%s: %v", name, v.Ready())
	}
}

// After a good fetch, a refresh that brings something else than a key set,
// or too much, is refused, and the keys fetched before still verify.
func TestJWKSBadRefreshKeepsTheKeys(t *testing.T) {
	huge := append([]byte(`{"keys":[`), []byte(strings.Repeat(" ", auth.MaxJWKSBody))...)
	for name, body := range map[string][]byte{"not a key set": []byte(`{"hello":"world"}`), "huge": huge} {
		k1 := newTestKey(t, auth.AlgES256, "b1")
		srv := newJWKSServer(t)
		srv.set(setOf(k1), false)
		v, err := auth.New(auth.Options{JWKSURLs: []string{srv.URL}})
		if err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, 5*time.Second, func() bool { return v.Ready() == nil }, "first fetch")
		srv.set(body, false)
		srv.mu.Lock()
		hits := srv.hits
		srv.mu.Unlock()
		unknown := issue(t, newTestKey(t, auth.AlgES256, "b9"), auth.RoleCaller, "w")
		_, err = v.Verify(unknown, auth.RoleCaller, "w")
		wantRefused(t, err, unknown, `unknown key id "b9"`)
		srv.mu.Lock()
		if srv.hits != hits+1 {
			t.Fatalf("%s: an unknown kid did not refresh (%d fetches, %d before)", name, srv.hits, hits)
		}
		srv.mu.Unlock()
		if _, err := v.Verify(issue(t, k1, auth.RoleCaller, "w"), auth.RoleCaller, "w"); err != nil {
			t.Fatalf("%s: keys lost by a refused refresh: %v", name, err)
		}
		v.Close()
	}
}

func TestJWKSURLMustBeHTTP(t *testing.T) {
	for _, u := range []string{"file:///etc/passwd", "not a url", "https://"} {
		if v, err := auth.New(auth.Options{JWKSURLs: []string{u}}); err == nil {
			v.Close()
			t.Errorf("%q accepted", u)
		}
	}
}

func TestEncryptionKeyVerifiesNothing(t *testing.T) {
	k := newTestKey(t, auth.AlgES256, "e")
	k.pub.USE = jwkset.UseEnc
	path := filepath.Join(t.TempDir(), "keys.json")
	writeSet(t, path, k)
	v, err := auth.New(auth.Options{KeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	tok := issue(t, k, auth.RoleCaller, "w")
	_, err = v.Verify(tok, auth.RoleCaller, "w")
	wantRefused(t, err, tok, `key "e": key may not verify this token`)
}
