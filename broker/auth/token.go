// Package auth is who may do what on a broker: tokens (JWTs naming a role
// and workspaces), issued by Issue (issue.go) and checked by a Verifier
// (verify.go). A token's kid picks its key: the secret for a token without
// one, else a key of the --keys JWK Set (keys.go, reloaded by
// Verifier.Reload) or of an identity provider's JWKS URL (jwks.go); each
// key verifies its own algorithm only. Every door of the broker (the
// Socket.IO CONNECT, the caller HTTP API, the MCP endpoint) asks the one
// Verifier; a new way to trust or refuse a token goes in here, behind
// Verify.
package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tetherdev/tether/audit"
)

// Roles a token can carry.
const (
	RoleBridge = "bridge" // registers its workspace over the socket
	RoleCaller = "caller" // sends calls through the HTTP API
	RoleAdmin  = "admin"  // manages the broker (revocations); no workspace
)

// AnyWorkspace in a caller token's workspaces allows every workspace.
const AnyWorkspace = "*"

// Claims are the claims of a tether token.
type Claims struct {
	Role       string   `json:"role"`
	Workspaces []string `json:"workspaces"`
	// KeyID is the kid of the key that signed the token (its header's),
	// "" for the broker's secret: the audit log names it.
	KeyID string `json:"-"`
	jwt.RegisteredClaims
}

// Principal is who the claims name, for the audit log: the token's sub,
// jti, kid and role, never the token. nil for nil claims.
func (c *Claims) Principal() *audit.Principal {
	if c == nil {
		return nil
	}
	return &audit.Principal{Sub: c.Subject, JTI: c.ID, KID: c.KeyID, Role: c.Role}
}

// Allows reports whether the claims cover workspaceID.
func (c *Claims) Allows(workspaceID string) bool {
	if c.Role == RoleCaller && slices.Contains(c.Workspaces, AnyWorkspace) {
		return true
	}
	return slices.Contains(c.Workspaces, workspaceID)
}

// ClaimNames name the claims carrying tether's role and workspaces in a
// token from an identity provider (--role-claim, --workspaces-claim).
type ClaimNames struct {
	Role       string // default "role"
	Workspaces string // default "workspaces"
}

// claimsOf reads tether's claims out of a verified token's claims. A
// workspaces claim is an array of strings, or one string of ids separated
// by spaces or commas (the form of OAuth's "scope").
func claimsOf(mc jwt.MapClaims, names ClaimNames) (*Claims, error) {
	c := &Claims{}
	var err error
	if c.ExpiresAt, err = mc.GetExpirationTime(); err != nil {
		return nil, err
	}
	if c.IssuedAt, err = mc.GetIssuedAt(); err != nil {
		return nil, err
	}
	if c.NotBefore, err = mc.GetNotBefore(); err != nil {
		return nil, err
	}
	if c.Issuer, err = mc.GetIssuer(); err != nil {
		return nil, err
	}
	if c.Subject, err = mc.GetSubject(); err != nil {
		return nil, err
	}
	if c.Audience, err = mc.GetAudience(); err != nil {
		return nil, err
	}
	if v, ok := mc["jti"]; ok {
		if c.ID, ok = v.(string); !ok {
			return nil, errors.New(`claim "jti" is not a string`)
		}
	}
	if v, ok := mc[names.Role]; ok {
		if c.Role, ok = v.(string); !ok {
			return nil, fmt.Errorf("claim %q (the role) is not a string", names.Role)
		}
	}
	switch v := mc[names.Workspaces].(type) {
	case nil:
	case string:
		c.Workspaces = strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
	case []any:
		for _, w := range v {
			s, ok := w.(string)
			if !ok {
				return nil, fmt.Errorf("claim %q (the workspaces) holds a non-string", names.Workspaces)
			}
			c.Workspaces = append(c.Workspaces, s)
		}
	default:
		return nil, fmt.Errorf("claim %q (the workspaces) is neither a string nor an array of strings", names.Workspaces)
	}
	return c, nil
}
