package revoke

import (
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/strictjson"
	"github.com/tetherdev/tether/protocol"
)

// Entry is one revocation: of the token whose jti is JTI, or of every token
// for WorkspaceID issued before IssuedBefore. Exactly one form is set.
type Entry struct {
	JTI          string     `json:"jti,omitempty"`
	WorkspaceID  string     `json:"workspace_id,omitempty"`
	IssuedBefore *time.Time `json:"issued_before,omitempty"`
	// CreatedAt is when the revocation was made; ExpiresAt when it ends
	// (the revoked tokens have expired by then, see List).
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// By names the admin token that made it (its jti, and its sub if it
	// has one), never the token itself.
	By string `json:"by,omitempty"`
}

// key identifies what an entry revokes: two entries of one key revoke the
// same tokens.
func (e *Entry) key() string {
	if e.JTI != "" {
		return "jti:" + e.JTI
	}
	return "ws:" + e.WorkspaceID + "@" + e.IssuedBefore.UTC().Format(time.RFC3339Nano)
}

// matches reports whether e revokes the token of c. A workspace entry
// matches a token that names the workspace among its workspaces (a "*"
// caller token does not: revoke it by its jti) and was issued before
// IssuedBefore, compared at the second a token's iat has; a token without
// iat is taken as issued before any time.
func (e *Entry) matches(c *auth.Claims) bool {
	if e.JTI != "" {
		return c.ID == e.JTI
	}
	for _, ws := range c.Workspaces {
		if ws == e.WorkspaceID {
			return c.IssuedAt == nil || c.IssuedAt.Before(*e.IssuedBefore)
		}
	}
	return false
}

// Request is the body of POST /api/v1/admin/revocations: {"jti": "…"}, or
// {"workspace_id": "…", "issued_before": "<RFC 3339>"}.
type Request struct {
	JTI          string `json:"jti,omitempty"`
	WorkspaceID  string `json:"workspace_id,omitempty"`
	IssuedBefore string `json:"issued_before,omitempty"`

	issuedBefore time.Time // IssuedBefore parsed (DecodeRequest)
}

// maxIDLen bounds a jti and a workspace id in a request: ids, not
// documents.
const maxIDLen = 256

// DecodeRequest reads a revocation request. Every refusal is a
// *protocol.Error with CodeInvalidRequest whose message names the field:
// an unknown member, a value of the wrong kind, an issued_before that is
// not an RFC 3339 time, both forms or neither.
func DecodeRequest(body []byte) (Request, error) {
	var r Request
	if err := strictjson.Decode(body, &r); err != nil {
		return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: %v", err)
	}
	switch {
	case r.JTI != "" && (r.WorkspaceID != "" || r.IssuedBefore != ""):
		return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: give jti, or workspace_id with issued_before, not both")
	case r.JTI != "":
		if len(r.JTI) > maxIDLen {
			return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: jti is longer than %d bytes", maxIDLen)
		}
		return r, nil
	case r.WorkspaceID == "" && r.IssuedBefore == "":
		return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: jti, or workspace_id with issued_before, is required")
	case r.WorkspaceID == "":
		return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: workspace_id is required with issued_before")
	case r.IssuedBefore == "":
		return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: issued_before is required with workspace_id")
	case len(r.WorkspaceID) > maxIDLen:
		return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: workspace_id is longer than %d bytes", maxIDLen)
	case r.WorkspaceID == auth.AnyWorkspace:
		return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: workspace_id must name a workspace, not '*'")
	}
	t, err := time.Parse(time.RFC3339Nano, r.IssuedBefore)
	if err != nil {
		return Request{}, protocol.Errorf(protocol.CodeInvalidRequest, "revocation: issued_before is not an RFC 3339 time (2026-01-02T15:04:05Z)")
	}
	r.issuedBefore = t.UTC()
	return r, nil
}
