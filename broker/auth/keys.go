package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
)

// The algorithms tether verifies, one per kind of key: a key verifies only
// its own, so an RSA public key can never be used as an HMAC secret (alg
// confusion), and "none" is never among them.
const (
	AlgHS256 = "HS256" // oct
	AlgEdDSA = "EdDSA" // OKP Ed25519
	AlgES256 = "ES256" // EC P-256
	AlgRS256 = "RS256" // RSA, 2048 bits or more
)

var validAlgs = []string{AlgHS256, AlgEdDSA, AlgES256, AlgRS256}

// sigUse are the "use" values of a key that verifies tokens: "sig", or
// none said; an encryption key ("enc") never does.
var sigUse = []jwkset.USE{jwkset.UseSig, ""}

// minRSABits refuses RSA keys too short to trust.
const minRSABits = 2048

// algOfKey is the one algorithm a verification key may verify.
func algOfKey(k any) (string, error) {
	switch k := k.(type) {
	case []byte:
		if len(k) == 0 {
			return "", errors.New("empty oct key")
		}
		return AlgHS256, nil
	case ed25519.PublicKey:
		return AlgEdDSA, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("EC curve %s is not supported (P-256 only)", k.Curve.Params().Name)
		}
		return AlgES256, nil
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return "", fmt.Errorf("RSA key of %d bits is too short (%d at least)", k.N.BitLen(), minRSABits)
		}
		return AlgRS256, nil
	default:
		return "", fmt.Errorf("unsupported key type %T", k)
	}
}

// publicOf is the verification half of a key (a private key's public key).
func publicOf(k any) any {
	if p, ok := k.(interface{ Public() crypto.PublicKey }); ok {
		return p.Public()
	}
	return k
}

// checkJWK checks one key of a set: it has a kid, a kind tether verifies,
// and, when it names an alg, the alg of its kind.
func checkJWK(j jwkset.JWK) (string, error) {
	m := j.Marshal()
	if m.KID == "" {
		return "", fmt.Errorf("a %s key has no kid", m.KTY)
	}
	alg, err := algOfKey(publicOf(j.Key()))
	if err != nil {
		return "", fmt.Errorf("key %q: %w", m.KID, err)
	}
	if a := m.ALG.String(); a != "" && a != alg {
		return "", fmt.Errorf("key %q: alg %q does not fit its kind (%s)", m.KID, a, alg)
	}
	return alg, nil
}

// ParseKeySet parses a JSON Web Key Set of verification keys (the --keys
// file): each key has a unique kid and a kind tether verifies; a set with no
// key is an error, so a truncated file is never taken for "trust nothing".
func ParseKeySet(data []byte) ([]jwkset.JWK, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWK Set: %w", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New(`not a JWK Set: no "keys"`)
	}
	seen := make(map[string]bool, len(set.Keys))
	out := make([]jwkset.JWK, 0, len(set.Keys))
	for i, m := range set.Keys {
		// Private: oct keys are secrets, and only parse as such; a private
		// asymmetric key verifies through its public half.
		j, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		if _, err := checkJWK(j); err != nil {
			return nil, err
		}
		if seen[m.KID] {
			return nil, fmt.Errorf("kid %q appears twice", m.KID)
		}
		seen[m.KID] = true
		out = append(out, j)
	}
	return out, nil
}

// keySet is one generation of keys looked up by kid through keyfunc.
type keySet struct {
	kf keyfunc.Keyfunc
	n  int
}

func newKeySet(keys []jwkset.JWK) (*keySet, error) {
	st := jwkset.NewMemoryStorage()
	for _, k := range keys {
		if err := st.KeyWrite(context.Background(), k); err != nil {
			return nil, err
		}
	}
	kf, err := keyfunc.New(keyfunc.Options{Storage: st, UseWhitelist: sigUse})
	if err != nil {
		return nil, err
	}
	return &keySet{kf: kf, n: len(keys)}, nil
}

// loadKeyFile reads and parses the --keys file.
func loadKeyFile(path string) (*keySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading key file: %w", err)
	}
	keys, err := ParseKeySet(data)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return newKeySet(keys)
}

// lookup finds the key for t's kid: found is false when the set has no such
// kid; err is set when it has one that does not fit t's alg.
func (s *keySet) lookup(t *jwt.Token) (key any, found bool, err error) {
	k, err := s.kf.Keyfunc(t)
	if errors.Is(err, jwkset.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, errors.New("key may not verify this token (its alg or use differs)")
	}
	return k, true, fitAlg(k, t.Method.Alg())
}

// fitAlg refuses a key used for another algorithm than its own.
func fitAlg(key any, alg string) error {
	want, err := algOfKey(key)
	if err != nil {
		return err
	}
	if want != alg {
		return fmt.Errorf("key is %s, token is %s", want, alg)
	}
	return nil
}
