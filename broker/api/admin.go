package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/revoke"
	"github.com/tetherdev/tether/protocol"
)

// The admin's routes: revocations (package revoke). Each needs a token of
// the admin role: another role is 403 forbidden, no valid token 401.
//
//	POST /api/v1/admin/revocations  {"jti": "…"} or {"workspace_id": "…", "issued_before": "<RFC 3339>"}
//	                                -> 201 with the entry (revoke.Entry)
//	GET  /api/v1/admin/revocations  -> 200 {"revocations": [entry, …]}, those in effect

// maxRevocationBody bounds a revocation request: two short strings.
const maxRevocationBody = 16 << 10

// handleRevoke answers POST /api/v1/admin/revocations.
func (a *API) handleRevoke(c *gin.Context) {
	claims, err := a.auth.Verify(bearer(c.Request), auth.RoleAdmin, "")
	if err != nil {
		a.refusedAt(c, audit.RevocationAdd, audit.DoorHTTP, "", claims, err)
		refuse(c, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxRevocationBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			apiError(c, http.StatusRequestEntityTooLarge, protocol.CodePayloadTooLarge, "revocation request over 16 KiB")
			return
		}
		apiError(c, http.StatusBadRequest, protocol.CodeInvalidRequest, "reading revocation request: "+err.Error())
		return
	}
	req, err := revoke.DecodeRequest(body)
	if err == nil {
		var e revoke.Entry
		if e, err = a.revoked.Revoke(c.Request.Context(), req, adminName(claims)); err == nil {
			// Who and what, never the admin's token.
			a.log.Info().Str("admin_jti", claims.ID).Str("admin_sub", claims.Subject).Str("jti", e.JTI).Str("workspace_id", e.WorkspaceID).
				Any("issued_before", e.IssuedBefore).Time("expires_at", e.ExpiresAt).Msg("token revoked")
			a.admin(c, audit.RevocationAdd, claims, &audit.Revocation{JTI: e.JTI, Workspace: e.WorkspaceID, IssuedBefore: e.IssuedBefore})
			c.JSON(http.StatusCreated, e)
			return
		}
	}
	f := protocol.FailureFrom("", err, protocol.CodeInvalidRequest)
	status := http.StatusBadRequest
	if f.Error == protocol.CodeBusUnavailable {
		status = http.StatusServiceUnavailable
	}
	apiError(c, status, f.Error, f.Message)
}

// handleRevocations answers GET /api/v1/admin/revocations.
func (a *API) handleRevocations(c *gin.Context) {
	claims, err := a.auth.Verify(bearer(c.Request), auth.RoleAdmin, "")
	if err != nil {
		a.refusedAt(c, audit.RevocationList, audit.DoorHTTP, "", claims, err)
		refuse(c, err)
		return
	}
	a.admin(c, audit.RevocationList, claims, nil)
	c.JSON(http.StatusOK, gin.H{"revocations": a.revoked.Entries()})
}

// adminName names the admin token that made a revocation: its jti and its
// sub, when it has them.
func adminName(c *auth.Claims) string {
	name := "jti:" + c.ID
	if c.Subject != "" {
		name += " sub:" + c.Subject
	}
	return name
}
