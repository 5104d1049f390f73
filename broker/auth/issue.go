package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// SigningKey signs tokens: an HS256 secret (no kid: the broker's --secret)
// or a key of a --keys set, named by its kid.
type SigningKey struct {
	KID string
	Alg string
	Key any // []byte, ed25519.PrivateKey, *ecdsa.PrivateKey or *rsa.PrivateKey
}

// SecretKey is the signing key of a --secret.
func SecretKey(secret []byte) SigningKey { return SigningKey{Alg: AlgHS256, Key: secret} }

// LoadSigningKey reads the key kid from path: a JWK Set or one JWK, holding
// an oct secret or a private key (EdDSA, ES256 or RS256). kid may be empty
// when the file holds one key.
func LoadSigningKey(path, kid string) (SigningKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return SigningKey{}, fmt.Errorf("reading signing key: %w", err)
	}
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &set); err != nil {
		return SigningKey{}, fmt.Errorf("signing key file %s: not JSON: %w", path, err)
	}
	if len(set.Keys) == 0 { // one JWK, not a set
		var one jwkset.JWKMarshal
		if err := json.Unmarshal(data, &one); err != nil || one.KTY == "" {
			return SigningKey{}, fmt.Errorf("signing key file %s: neither a JWK Set nor a JWK", path)
		}
		set.Keys = []jwkset.JWKMarshal{one}
	}
	var found []jwkset.JWKMarshal
	for _, m := range set.Keys {
		if kid == "" || m.KID == kid {
			found = append(found, m)
		}
	}
	switch {
	case len(found) == 0:
		return SigningKey{}, fmt.Errorf("signing key file %s: no key with kid %q", path, kid)
	case len(found) > 1:
		return SigningKey{}, fmt.Errorf("signing key file %s holds %d keys: name one with --kid", path, len(found))
	}
	j, err := jwkset.NewJWKFromMarshal(found[0], jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
	if err != nil {
		return SigningKey{}, fmt.Errorf("signing key %q: %w", found[0].KID, err)
	}
	alg, err := checkJWK(j)
	if err != nil {
		return SigningKey{}, err
	}
	k := SigningKey{KID: found[0].KID, Alg: alg, Key: j.Key()}
	if _, ok := k.Key.([]byte); !ok && !isPrivate(k.Key) {
		return SigningKey{}, fmt.Errorf("signing key %q is a public key: signing needs the private JWK", k.KID)
	}
	return k, nil
}

func isPrivate(k any) bool {
	switch k.(type) {
	case ed25519.PrivateKey, *ecdsa.PrivateKey, *rsa.PrivateKey:
		return true
	}
	return false
}

// Issued is a signed token with the facts a caller keeps about it.
type Issued struct {
	Token     string    `json:"token"`
	JTI       string    `json:"jti"`
	ExpiresAt time.Time `json:"expires_at"`
}

// IssueToken signs a token for role and workspaces with secret (HS256, no
// kid), valid for ttl.
func IssueToken(secret []byte, role string, workspaces []string, ttl time.Duration) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("issuing token: empty secret")
	}
	is, err := Issue(SecretKey(secret), role, workspaces, ttl)
	return is.Token, err
}

// Issue signs a token for role and workspaces with k, valid for ttl; its
// header names k's kid. Tokens always expire: a leaked token must not be
// good forever, and each has its own id (jti), by which it can be revoked.
// A bridge token must name concrete workspaces; an admin token names none.
func Issue(k SigningKey, role string, workspaces []string, ttl time.Duration) (Issued, error) {
	if role != RoleBridge && role != RoleCaller && role != RoleAdmin {
		return Issued{}, fmt.Errorf("issuing token: role must be %q, %q or %q, got %q", RoleBridge, RoleCaller, RoleAdmin, role)
	}
	if ttl <= 0 {
		return Issued{}, errors.New("issuing token: ttl must be positive")
	}
	if role == RoleAdmin {
		workspaces = nil
	} else if len(workspaces) == 0 {
		return Issued{}, errors.New("issuing token: no workspace")
	}
	if role == RoleBridge && slices.Contains(workspaces, AnyWorkspace) {
		return Issued{}, errors.New("issuing token: a bridge token serves named workspaces, not '*'")
	}
	method := jwt.GetSigningMethod(k.Alg)
	if method == nil || !slices.Contains(validAlgs, k.Alg) {
		return Issued{}, fmt.Errorf("issuing token: unsupported alg %q", k.Alg)
	}
	now := time.Now()
	claims := Claims{Role: role, Workspaces: workspaces, RegisteredClaims: jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		Issuer:    "tether",
		ID:        uuid.NewString(),
	}}
	t := jwt.NewWithClaims(method, claims)
	if k.KID != "" {
		t.Header["kid"] = k.KID
	}
	s, err := t.SignedString(k.Key)
	if err != nil {
		return Issued{}, fmt.Errorf("issuing token: %w", err)
	}
	return Issued{Token: s, JTI: claims.ID, ExpiresAt: claims.ExpiresAt.Time.UTC().Truncate(time.Second)}, nil
}
