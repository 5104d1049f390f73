package e2e_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
)

// The keys tests run real brokers with --keys (a JWK Set file re-read on
// SIGHUP) and --jwks-url (an identity provider's key set, served here by
// an httptest server on loopback that the test rotates and takes down),
// and mint tokens with `tether token --keys` and `tether keys new`.

// tetherOut runs a tether command and returns its stdout; it must succeed.
func tetherOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(tetherBin, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("tether %s: %v %s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

// mint runs `tether token --keys FILE --kid KID --json` and returns what it
// printed.
func mint(t *testing.T, keys, kid, role string, ws string, ttl time.Duration) auth.Issued {
	t.Helper()
	out := tetherOut(t, "token", "--keys", keys, "--kid", kid, "--role", role, "--workspace", ws, "--ttl", ttl.String(), "--json")
	var is auth.Issued
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&is); err != nil || is.Token == "" || is.JTI == "" {
		t.Fatalf("tether token --json printed %q (%v)", out, err)
	}
	return is
}

// apiStatus GETs the workspace list with tok and returns the status and
// the body.
func apiStatus(t *testing.T, b *brokerProc, tok string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.url+"/api/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// wantUnauthorized checks a 401 naming reason, without the token in it.
func wantUnauthorized(t *testing.T, b *brokerProc, name, tok, reason string) {
	t.Helper()
	status, body := apiStatus(t, b, tok)
	if status != http.StatusUnauthorized || !strings.Contains(body, `"error":"unauthorized"`) || !strings.Contains(body, reason) {
		t.Errorf("%s: %d %s, want 401 saying %q", name, status, body, reason)
	}
	if strings.Contains(body, tok) {
		t.Errorf("%s: the refusal echoes the token", name)
	}
}

func TestKeysTokenCommandSignsWithEveryAlg(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "pub.jwks.json")
	algs := []string{auth.AlgHS256, auth.AlgEdDSA, auth.AlgES256, auth.AlgRS256}
	for _, alg := range algs {
		tetherOut(t, "keys", "new", "--alg", alg, "--kid", "k-"+alg, "--private", filepath.Join(dir, alg+".jwk.json"), "--public-set", pub)
	}
	if fi, err := os.Stat(filepath.Join(dir, auth.AlgEdDSA+".jwk.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file mode: %v %v", fi.Mode(), err)
	}
	b := startBroker(t, "--keys", pub)
	for _, alg := range algs {
		before := time.Now()
		is := mint(t, filepath.Join(dir, alg+".jwk.json"), "k-"+alg, auth.RoleCaller, "*", 2*time.Hour)
		if d := is.ExpiresAt.Sub(before); d < 2*time.Hour-2*time.Second || d > 2*time.Hour+2*time.Second {
			t.Errorf("%s: expires_at %s is not 2h from now", alg, is.ExpiresAt)
		}
		parsed, _, err := jwt.NewParser().ParseUnverified(is.Token, jwt.MapClaims{})
		if err != nil || parsed.Header["kid"] != "k-"+alg || parsed.Header["alg"] != alg || parsed.Claims.(jwt.MapClaims)["jti"] != is.JTI {
			t.Errorf("%s: header %v, claims %v (%v)", alg, parsed.Header, parsed.Claims, err)
		}
		if status, body := apiStatus(t, b, is.Token); status != http.StatusOK {
			t.Errorf("%s token refused: %d %s", alg, status, body)
		}
	}
	// The public set cannot sign an asymmetric key's tokens.
	if err := exec.Command(tetherBin, "token", "--keys", pub, "--kid", "k-ES256", "--role", "caller", "--workspace", "w").Run(); err == nil {
		t.Error("signed with a public key")
	}
}

func TestKeysFileNotAKeySetStopsTheStart(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(bad, []byte(`{"keys":[{"kty":"EC"`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tetherBin, "broker", "--listen", "127.0.0.1:0", "--keys", bad).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(string(out), "key file") {
		t.Fatalf("broker with a malformed --keys: %v %s", err, out)
	}
}

// TestKeysRotationBySIGHUPKeepsSockets follows the rotation steps: two
// kids in the set, k1 removed and SIGHUP: k1's tokens are refused from the
// next request on, k2's work, and no socket is dropped. A bridge that
// connected with a k1 token stays connected: a key's removal stops new
// uses of its tokens; cutting a live socket is revocation's job.
func TestKeysRotationBySIGHUPKeepsSockets(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "pub.jwks.json")
	k1, k2 := filepath.Join(dir, "k1.jwk.json"), filepath.Join(dir, "k2.jwk.json")
	tetherOut(t, "keys", "new", "--alg", "EdDSA", "--kid", "k1", "--private", k1, "--public-set", pub)
	tetherOut(t, "keys", "new", "--alg", "ES256", "--kid", "k2", "--private", k2, "--public-set", pub)
	b := startBroker(t, "--keys", pub)

	bridge1 := start(t, "bridge ws-k1", bridgeCmd(b, "ws-k1", mint(t, k1, "k1", auth.RoleBridge, "ws-k1", time.Hour).Token, t.TempDir()))
	bridge2 := start(t, "bridge ws-k2", bridgeCmd(b, "ws-k2", mint(t, k2, "k2", auth.RoleBridge, "ws-k2", time.Hour).Token, t.TempDir()))
	testwait.Until(t, 10*time.Second, func() bool { return b.holds("ws-k1") && b.holds("ws-k2") }, "both bridges held")

	c1 := mint(t, k1, "k1", auth.RoleCaller, "*", time.Hour).Token
	c2 := mint(t, k2, "k2", auth.RoleCaller, "*", time.Hour).Token
	for _, tok := range []string{c1, c2} {
		if r := b.call("ws-k1", tok, `{"endpoint":"/api/ping","timeout":5}`); r.status != http.StatusOK {
			t.Fatalf("before rotation: %d %+v %v", r.status, r.resp, r.err)
		}
	}

	tetherOut(t, "keys", "remove", "--kid", "k1", "--public-set", pub)
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	b.waitLine(5*time.Second, "keys reloaded")
	wantUnauthorized(t, b, "k1 after its removal", c1, `unknown key id \"k1\"`)
	for _, ws := range []string{"ws-k1", "ws-k2"} {
		if r := b.call(ws, c2, `{"endpoint":"/api/ping","timeout":5}`); r.status != http.StatusOK {
			t.Fatalf("k2 caller to %s after rotation: %d %+v %v", ws, r.status, r.resp, r.err)
		}
	}

	// A malformed file on SIGHUP: logged, the keys before stay.
	if err := os.WriteFile(pub, []byte(`{"keys":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	b.waitLine(5*time.Second, "reloading keys failed")
	if status, body := apiStatus(t, b, mint(t, k2, "k2", auth.RoleCaller, "*", time.Hour).Token); status != http.StatusOK {
		t.Fatalf("k2 after a failed reload: %d %s", status, body)
	}

	// No socket dropped: neither bridge logged a disconnect, and both are
	// still held by the same connection.
	for _, p := range []*proc{bridge1, bridge2} {
		if n := countLines(p, "disconnected"); n != 0 {
			t.Errorf("%s disconnected %d times across the reloads", p.name, n)
		}
	}
	if !b.holds("ws-k1") || !b.holds("ws-k2") {
		t.Error("a workspace is no longer held after the reloads")
	}
}

// idp is an identity provider's JWKS URL: an httptest server on loopback
// whose key set the test changes, or takes down.
type idp struct {
	*httptest.Server
	mu   sync.Mutex
	keys []jwkset.JWKMarshal
	down bool
}

func newIDP(t *testing.T) *idp {
	p := &idp{down: true}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(jwkset.JWKSMarshal{Keys: p.keys})
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *idp) serve(down bool, keys ...idpKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	p.keys = nil
	for _, k := range keys {
		p.keys = append(p.keys, k.pub)
	}
}

// idpKey is a key of the identity provider: the test signs with it.
type idpKey struct {
	kid, alg string
	priv     any
	pub      jwkset.JWKMarshal
}

func newIDPKey(t *testing.T, alg, kid string) idpKey {
	t.Helper()
	var priv any
	var err error
	switch alg {
	case auth.AlgES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case auth.AlgEdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, pub, err := auth.JWKOf(priv, alg, kid)
	if err != nil {
		t.Fatal(err)
	}
	return idpKey{kid: kid, alg: alg, priv: priv, pub: pub}
}

const idpIssuer = "https://idp.example.test"

func (k idpKey) sign(t *testing.T, mod func(jwt.MapClaims)) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{"iss": idpIssuer, "aud": "tether-e2e", "sub": "agent-1", "role": "caller", "workspaces": "*",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if mod != nil {
		mod(c)
	}
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.alg), c)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readyz(t *testing.T, b *brokerProc) (int, string) {
	res, err := http.Get(b.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// TestJWKSRotationOutageAndReadiness: the broker is not ready until the
// provider's key set was fetched once; a token of a kid the provider added
// later is accepted after the refresh its unknown kid starts; with the
// provider down, the keys fetched before still verify.
func TestJWKSRotationOutageAndReadiness(t *testing.T) {
	p := newIDP(t)
	a1, a2 := newIDPKey(t, auth.AlgES256, "a1"), newIDPKey(t, auth.AlgEdDSA, "a2")
	b := startBroker(t, "--jwks-url", p.URL, "--token-issuer", idpIssuer, "--token-audience", "tether-e2e")
	if status, body := readyz(t, b); status != http.StatusServiceUnavailable || !strings.Contains(body, "JWKS") {
		t.Fatalf("readyz before the first fetch: %d %s", status, body)
	}
	p.serve(false, a1)
	testwait.Until(t, 15*time.Second, func() bool { s, _ := readyz(t, b); return s == http.StatusOK }, "ready after the first fetch")
	if status, body := apiStatus(t, b, a1.sign(t, nil)); status != http.StatusOK {
		t.Fatalf("a1 token: %d %s", status, body)
	}

	p.serve(false, a1, a2)
	if status, body := apiStatus(t, b, a2.sign(t, nil)); status != http.StatusOK {
		t.Fatalf("token of the rotated-in kid a2: %d %s", status, body)
	}

	p.serve(true)
	for _, k := range []idpKey{a1, a2} {
		if status, body := apiStatus(t, b, k.sign(t, func(c jwt.MapClaims) { c["jti"] = "fresh-" + k.kid })); status != http.StatusOK {
			t.Fatalf("%s while the provider is down: %d %s", k.kid, status, body)
		}
	}
	if status, body := readyz(t, b); status != http.StatusOK {
		t.Fatalf("readyz while the provider is down after a fetch: %d %s", status, body)
	}
}

// TestBadTokensAnswer401WithTheirReason: each bad token is refused with
// its reason, and a good one still works after them.
func TestBadTokensAnswer401WithTheirReason(t *testing.T) {
	p := newIDP(t)
	a1 := newIDPKey(t, auth.AlgES256, "a1")
	p.serve(false, a1)
	b := startBroker(t, "--jwks-url", p.URL, "--token-issuer", idpIssuer, "--token-audience", "tether-e2e")
	testwait.Until(t, 15*time.Second, func() bool { s, _ := readyz(t, b); return s == http.StatusOK }, "ready")
	now := time.Now()
	var used []string
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"role": "caller", "workspaces": "*", "exp": now.Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, c := range []struct{ name, tok, reason string }{
		{"expired", a1.sign(t, func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }), "token expired"},
		{"not yet valid", a1.sign(t, func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }), "token not valid yet"},
		{"wrong issuer", a1.sign(t, func(c jwt.MapClaims) { c["iss"] = "https://evil.example.test" }), "wrong issuer"},
		{"wrong audience", a1.sign(t, func(c jwt.MapClaims) { c["aud"] = "someone-else" }), "wrong audience"},
		{"alg none", none, "signing method none is invalid"},
		{"unknown kid", newIDPKey(t, auth.AlgES256, "zz").sign(t, nil), `unknown key id \"zz\"`},
		{"no exp", a1.sign(t, func(c jwt.MapClaims) { delete(c, "exp") }), "no expiry"},
	} {
		wantUnauthorized(t, b, c.name, c.tok, c.reason)
		used = append(used, c.tok)
	}
	good := a1.sign(t, nil)
	if status, body := apiStatus(t, b, good); status != http.StatusOK {
		t.Fatalf("a good token after the bad ones: %d %s", status, body)
	}
	// No token, good or bad, in the broker's logs (its debug level).
	for _, line := range b.logLines() {
		for _, tok := range append(used, good) {
			if strings.Contains(line, tok) {
				t.Fatalf("a token in the log: %s", line)
			}
		}
	}
}

// TestMCPOAuthDiscoveryAndProviderToken: the MCP endpoint is an OAuth
// protected resource. Without a token it answers 401 pointing at its
// metadata; the metadata names the authorization server; the official
// TypeScript SDK client connects with the provider's token whose audience
// is the endpoint, and is refused with another audience.
func TestMCPOAuthDiscoveryAndProviderToken(t *testing.T) {
	p := newIDP(t)
	a1 := newIDPKey(t, auth.AlgES256, "a1")
	p.serve(false, a1)
	b := startBroker(t, "--jwks-url", p.URL, "--token-issuer", idpIssuer, "--oauth-issuer", idpIssuer)
	testwait.Until(t, 15*time.Second, func() bool { s, _ := readyz(t, b); return s == http.StatusOK }, "ready")
	startBridge(t, b, "ws-oauth")
	resource := b.url + "/api/v1/workspaces/ws-oauth/mcp"
	metadata := b.url + "/.well-known/oauth-protected-resource/api/v1/workspaces/ws-oauth/mcp"

	wantChallenge(t, resource, `Bearer resource_metadata="`+metadata+`"`)

	res, err := http.Get(metadata)
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ResourceName           string   `json:"resource_name"`
	}
	dec := json.NewDecoder(res.Body)
	dec.DisallowUnknownFields()
	err = dec.Decode(&md)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || md.Resource != resource || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != idpIssuer ||
		len(md.BearerMethodsSupported) != 1 || md.BearerMethodsSupported[0] != "header" {
		t.Fatalf("metadata: %d %+v %v", res.StatusCode, md, err)
	}

	tok := a1.sign(t, func(c jwt.MapClaims) { c["aud"] = resource; c["workspaces"] = []string{"ws-oauth"} })
	c := connectMCP(t, "--url", resource, "--token", tok)
	if tools := c.list(); tools.Err != "" || len(tools.Tools) == 0 {
		t.Fatalf("tools over a provider's token: %+v", tools)
	}

	other := a1.sign(t, func(c jwt.MapClaims) {
		c["aud"] = "https://elsewhere.example.test/mcp"
		c["workspaces"] = []string{"ws-oauth"}
	})
	if _, ev := startMCPClient(t, "--url", resource, "--token", other); ev["event"] != "connect_error" {
		t.Fatalf("token for another audience: %v", ev)
	}
	req, _ := http.NewRequest(http.MethodPost, resource, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+other)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "wrong audience") {
		t.Fatalf("token for another audience over plain HTTP: %d %s", res.StatusCode, body)
	}
}

// wantChallenge checks that an MCP initialize without a token at resource
// answers 401 with the WWW-Authenticate challenge want.
func wantChallenge(t *testing.T, resource, want string) {
	t.Helper()
	res, err := http.Post(resource, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d, WWW-Authenticate %q, want 401 and %q", res.StatusCode, res.Header.Get("WWW-Authenticate"), want)
	}
}

// TestMCPOAuthScopesInTheMetadataAndTheChallenge: --oauth-scope names the
// scopes a client asks the authorization server for, in the metadata's
// scopes_supported and the 401 challenge's scope; one that is not an OAuth
// scope token stops the start, naming it.
func TestMCPOAuthScopesInTheMetadataAndTheChallenge(t *testing.T) {
	b := startBroker(t, "--oauth-issuer", idpIssuer, "--oauth-scope", "mcp:tools", "--oauth-scope", "offline_access")
	resource := b.url + "/api/v1/workspaces/ws-scopes/mcp"
	metadata := b.url + "/.well-known/oauth-protected-resource/api/v1/workspaces/ws-scopes/mcp"
	wantChallenge(t, resource, `Bearer resource_metadata="`+metadata+`", scope="mcp:tools offline_access"`)
	res, err := http.Get(metadata)
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		ScopesSupported []string `json:"scopes_supported"`
	}
	err = json.NewDecoder(res.Body).Decode(&md)
	res.Body.Close()
	if err != nil || !slices.Equal(md.ScopesSupported, []string{"mcp:tools", "offline_access"}) {
		t.Fatalf("metadata scopes_supported %v, %v", md.ScopesSupported, err)
	}

	for _, bad := range []string{"two words", `say"hi"`, ""} {
		out, err := exec.Command(tetherBin, "broker", "--listen", "127.0.0.1:0", "--secret", "s3cret-scopes", "--oauth-scope", bad).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--oauth-scope") {
			t.Errorf("--oauth-scope %q: %v %s, want exit 2 naming the flag", bad, err, out)
		}
	}
}

// With --public-url the MCP endpoint is that URL's resource whatever Host
// the client sends: its 401 points there, and a provider token whose
// audience is the address the client happened to use does not fit; one
// naming the public resource does.
func TestMCPResourceIsThePublicURL(t *testing.T) {
	p := newIDP(t)
	a1 := newIDPKey(t, auth.AlgES256, "a1")
	p.serve(false, a1)
	const public = "https://broker.example.test"
	b := startBroker(t, "--jwks-url", p.URL, "--token-issuer", idpIssuer, "--oauth-issuer", idpIssuer, "--public-url", public+"/")
	testwait.Until(t, 15*time.Second, func() bool { s, _ := readyz(t, b); return s == http.StatusOK }, "ready")
	startBridge(t, b, "ws-public")
	local := b.url + "/api/v1/workspaces/ws-public/mcp"
	post := func(tok string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, local, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(body)
	}
	res, _ := post("")
	if want := `Bearer resource_metadata="` + public + `/.well-known/oauth-protected-resource/api/v1/workspaces/ws-public/mcp"`; res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d, WWW-Authenticate %q, want %q", res.StatusCode, res.Header.Get("WWW-Authenticate"), want)
	}
	hostAud := a1.sign(t, func(c jwt.MapClaims) { c["aud"] = local; c["workspaces"] = []string{"ws-public"} })
	if res, body := post(hostAud); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "wrong audience") {
		t.Fatalf("token for the address the client used: %d %s, want 401 wrong audience", res.StatusCode, body)
	}
	publicAud := a1.sign(t, func(c jwt.MapClaims) {
		c["aud"] = public + "/api/v1/workspaces/ws-public/mcp"
		c["workspaces"] = []string{"ws-public"}
	})
	if res, body := post(publicAud); res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden {
		t.Fatalf("token for the public resource: %d %s", res.StatusCode, body)
	}
}
