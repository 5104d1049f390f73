// Package auth is who may do what on a broker: tether's tokens (HS256
// JWTs naming a role and workspaces), issued by IssueToken and checked by
// a Verifier. Every door of the broker (the Socket.IO CONNECT, the caller
// HTTP API, the MCP endpoint) asks the one Verifier; a new way to trust a
// token (rotating keys, an identity provider's JWKS, revocation) goes in
// here, behind Verify.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/tetherdev/tether/protocol"
)

// Roles a token can carry.
const (
	RoleBridge = "bridge" // registers its workspace over the socket
	RoleCaller = "caller" // sends calls through the HTTP API
	RoleAdmin  = "admin"  // manages the broker (revocations); no workspace
)

// AnyWorkspace in a caller token's workspaces allows every workspace.
const AnyWorkspace = "*"

// Claims are the claims of a tether token (HS256 JWT).
type Claims struct {
	Role       string   `json:"role"`
	Workspaces []string `json:"workspaces"`
	jwt.RegisteredClaims
}

// Allows reports whether the claims cover workspaceID.
func (c *Claims) Allows(workspaceID string) bool {
	if c.Role == RoleCaller && slices.Contains(c.Workspaces, AnyWorkspace) {
		return true
	}
	return slices.Contains(c.Workspaces, workspaceID)
}

// IssueToken signs a token for role and workspaces, valid for ttl. Tokens
// always expire: a leaked token must not be good forever, and each has its
// own id (jti), by which it can be revoked. A bridge token must name
// concrete workspaces; an admin token names none.
func IssueToken(secret []byte, role string, workspaces []string, ttl time.Duration) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("issuing token: empty secret")
	}
	if role != RoleBridge && role != RoleCaller && role != RoleAdmin {
		return "", fmt.Errorf("issuing token: role must be %q, %q or %q, got %q", RoleBridge, RoleCaller, RoleAdmin, role)
	}
	if ttl <= 0 {
		return "", errors.New("issuing token: ttl must be positive")
	}
	if role == RoleAdmin {
		workspaces = nil
	} else if len(workspaces) == 0 {
		return "", errors.New("issuing token: no workspace")
	}
	if role == RoleBridge && slices.Contains(workspaces, AnyWorkspace) {
		return "", errors.New("issuing token: a bridge token serves named workspaces, not '*'")
	}
	now := time.Now()
	claims := Claims{Role: role, Workspaces: workspaces, RegisteredClaims: jwt.RegisteredClaims{
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		Issuer:    "tether",
		ID:        uuid.NewString(),
	}}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("issuing token: %w", err)
	}
	return s, nil
}

// Verifier checks tokens. With no secret, authentication is off (only with
// tether broker --insecure-no-auth, on loopback) and every token,
// even an empty one, is accepted for any workspace. Its methods are safe
// for concurrent use.
type Verifier struct {
	secret []byte
	parser *jwt.Parser

	// cache holds tokens already verified, so a caller's every request does
	// not pay for HMAC and JSON again. Entries end with the token's expiry;
	// the map is dropped whole when it grows past cacheMax.
	mu    sync.Mutex
	cache map[string]*Claims

	// revoked, when set, is asked on every Verify, cached token or not.
	revoked Revocations
	// unchecked, when set, hears every Verify let in while authentication
	// is off (insecure.go).
	unchecked func(role, workspaceID string)
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

// NewVerifier returns a Verifier of tokens signed with secret; empty turns
// authentication off.
func NewVerifier(secret []byte) *Verifier {
	return &Verifier{
		secret: secret,
		// Only HS256: "none", RS*/ES* (key confusion) and other HMAC sizes
		// are refused before the signature is looked at.
		parser: jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}), jwt.WithExpirationRequired(), jwt.WithLeeway(5*time.Second)),
	}
}

// Enabled reports whether tokens are checked.
func (a *Verifier) Enabled() bool { return len(a.secret) > 0 }

// Verify checks token for role and workspaceID ("" for any). It returns a *protocol.Error
// with CodeUnauthorized (bad token) or CodeForbidden (valid token, wrong role
// or workspace).
func (a *Verifier) Verify(token, role, workspaceID string) (*Claims, error) {
	if !a.Enabled() {
		if a.unchecked != nil {
			a.unchecked(role, workspaceID)
		}
		return &Claims{Role: role, Workspaces: []string{AnyWorkspace}}, nil
	}
	if token == "" {
		return nil, protocol.Errorf(protocol.CodeUnauthorized, "missing token")
	}
	claims, err := a.parse(token)
	if err != nil {
		return nil, err
	}
	if a.revoked != nil && a.revoked.Revoked(claims) {
		return nil, protocol.Errorf(protocol.CodeUnauthorized, "token revoked")
	}
	if claims.Role != role {
		return nil, protocol.Errorf(protocol.CodeForbidden, "token role %q cannot act as %s", claims.Role, role)
	}
	if workspaceID != "" && !claims.Allows(workspaceID) {
		return nil, protocol.Errorf(protocol.CodeForbidden, "token does not cover workspace %q", workspaceID)
	}
	return claims, nil
}

// parse verifies a token's signature and expiry, through the cache.
func (a *Verifier) parse(token string) (*Claims, error) {
	now := time.Now()
	a.mu.Lock()
	c := a.cache[token]
	a.mu.Unlock()
	if c != nil && now.Before(c.ExpiresAt.Time) {
		return c, nil
	}
	var claims Claims
	if _, err := a.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return a.secret, nil }); err != nil {
		return nil, protocol.Errorf(protocol.CodeUnauthorized, "invalid token: %v", err)
	}
	a.mu.Lock()
	if a.cache == nil || len(a.cache) >= cacheMax {
		a.cache = make(map[string]*Claims)
	}
	a.cache[token] = &claims
	a.mu.Unlock()
	return &claims, nil
}
