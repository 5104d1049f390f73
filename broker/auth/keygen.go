package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"

	"github.com/MicahParks/jwkset"
)

// GenerateKey makes a new key for alg (HS256, EdDSA, ES256 or RS256) named
// kid: private signs (tether token --keys), public goes into the broker's
// --keys set. For HS256 both are the one secret.
func GenerateKey(alg, kid string) (private, public jwkset.JWKMarshal, err error) {
	if kid == "" {
		return private, public, fmt.Errorf("generating key: empty kid")
	}
	var key any
	switch alg {
	case AlgHS256:
		b := make([]byte, 32)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		key = b
	case AlgEdDSA:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	case AlgES256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case AlgRS256:
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	default:
		return private, public, fmt.Errorf("generating key: alg must be %s, %s, %s or %s, got %q", AlgHS256, AlgEdDSA, AlgES256, AlgRS256, alg)
	}
	if err != nil {
		return private, public, fmt.Errorf("generating key: %w", err)
	}
	return JWKOf(key, alg, kid)
}

// JWKOf is key (a secret or a private key) as a private and a public JWK
// named kid.
func JWKOf(key any, alg, kid string) (private, public jwkset.JWKMarshal, err error) {
	meta := jwkset.JWKMetadataOptions{ALG: jwkset.ALG(alg), KID: kid, USE: jwkset.UseSig}
	j, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{Metadata: meta, Marshal: jwkset.JWKMarshalOptions{Private: true}})
	if err != nil {
		return private, public, fmt.Errorf("encoding key %q: %w", kid, err)
	}
	private = j.Marshal()
	if alg == AlgHS256 {
		return private, private, nil
	}
	pj, err := jwkset.NewJWKFromKey(publicOf(key), jwkset.JWKOptions{Metadata: meta})
	if err != nil {
		return private, public, fmt.Errorf("encoding key %q: %w", kid, err)
	}
	return private, pj.Marshal(), nil
}
