package auth_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// FuzzVerify: whatever a client sends as a token, Verify never panics and
// refuses it with a structured error (the seed corpus is in
// testdata/fuzz/FuzzVerify, plus a valid token of each kind of key).
func FuzzVerify(f *testing.F) {
	var keys []testKey
	for _, alg := range []string{auth.AlgHS256, auth.AlgEdDSA, auth.AlgES256, auth.AlgRS256} {
		k := newTestKey(f, alg, "k-"+alg)
		keys = append(keys, k)
		f.Add(issue(f, k, auth.RoleCaller, "w"))
	}
	f.Add("")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	path := filepath.Join(f.TempDir(), "keys.json")
	writeSet(f, path, keys...)
	v, err := auth.New(auth.Options{KeysFile: path, Secret: []byte("s")})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Verify(token, auth.RoleCaller, "w")
		if err == nil {
			if c == nil || c.Role != auth.RoleCaller {
				t.Fatalf("accepted without caller claims: %+v", c)
			}
			return
		}
		var pe *protocol.Error
		if !errors.As(err, &pe) || (pe.Code != protocol.CodeUnauthorized && pe.Code != protocol.CodeForbidden) {
			t.Fatalf("not a structured refusal: %v", err)
		}
	})
}

// FuzzParseKeySet: a --keys file (outside input on every SIGHUP) never
// panics the parser; what it accepts has keys with kids.
func FuzzParseKeySet(f *testing.F) {
	k := newTestKey(f, auth.AlgES256, "e")
	b, _ := os.ReadFile(writeTemp(f, setOf(k)))
	f.Add(b)
	f.Add([]byte(`{"keys":[{"kty":"oct","kid":"a","k":"c2VjcmV0"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := auth.ParseKeySet(data)
		if err == nil && len(keys) == 0 {
			t.Fatal("accepted an empty set")
		}
	})
}

func writeTemp(t testing.TB, b []byte) string {
	p := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
