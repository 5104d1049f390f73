package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// The door of the MCP endpoint, /api/v1/workspaces/{id}/mcp: what serves
// MCP behind it is mounted from outside (Config.MCP, package mcp's
// Endpoint), and reaches the workspace through the API's own call path
// (API.Call), so its tool calls follow every rule of a call.
//
// Every HTTP request (POST, the GET event stream, DELETE) is authorised as
// a call is: a caller token (Bearer) covering the workspace, else 401
// (missing or invalid) or 403 (another workspace). The endpoint is an OAuth
// protected resource (MCP authorization, RFC 9728): a 401 points at its
// metadata (handleResourceMetadata), which names the authorization servers
// (--oauth-issuer), and a token from one of them is accepted when its
// audience is the endpoint's URL. A draining broker answers 503
// broker_shutdown.
//
// Each request is tracked in the revocation list while it is served: a
// revocation of its token ends it (an event stream closes, a request in
// flight is cancelled) and closes its MCP session, when the Mount can
// (SessionCloser). A session with nothing in flight is refused (401) at
// its next request, and closed then.
func (a *API) handleMCP(c *gin.Context) {
	ws := c.Param("id")
	claims, err := a.auth.VerifyFor(bearer(c.Request), auth.RoleCaller, ws, a.resourceURL(c.Request, ws))
	if err != nil {
		if auth.IsRevoked(err) {
			// A session idle since its token was revoked: signed with
			// a good key, so its id is the session's own to end.
			a.closeMCPSession(ws, c.GetHeader(mcpSessionHeader))
		}
		if authStatus(err) == http.StatusUnauthorized {
			a.challenge(c, ws)
		}
		a.refusedAt(c, audit.CallRefused, audit.DoorMCP, ws, claims, err)
		refuse(c, err)
		return
	}
	if a.core.Draining() {
		apiError(c, http.StatusServiceUnavailable, protocol.CodeBrokerShutdown, "broker is shutting down")
		return
	}
	ctx, cancel := context.WithCancel(a.withMCPNote(c.Request.Context(), c, ws, claims))
	defer cancel()
	sid := c.GetHeader(mcpSessionHeader)
	untrack, ok := a.revoked.Track(claims, func() {
		cancel()
		a.closeMCPSession(ws, sid)
	})
	if !ok { // revoked since Verify
		a.challenge(c, ws)
		a.refusedAt(c, audit.CallRefused, audit.DoorMCP, ws, claims, auth.ErrRevoked())
		refuse(c, auth.ErrRevoked())
		return
	}
	defer untrack()
	if err := a.mcp.ServeWorkspace(c.Writer, c.Request.WithContext(ctx), ws); err != nil {
		apiError(c, http.StatusServiceUnavailable, protocol.CodeBrokerShutdown, "MCP endpoint: "+err.Error())
		return
	}
	// A session this request opened (initialize) is not tracked by its
	// end func, which had no session id yet: close it if the token was
	// revoked meanwhile.
	if sid == "" && a.revoked.Revoked(claims) {
		a.closeMCPSession(ws, c.Writer.Header().Get(mcpSessionHeader))
	}
}

// mcpSessionHeader carries an MCP session's id (streamable HTTP).
const mcpSessionHeader = "Mcp-Session-Id"

// SessionCloser is a Mount that can end one of its sessions (package mcp's
// Endpoint): a revocation of the token a session's request carried closes
// the session.
type SessionCloser interface {
	CloseSession(ws, id string)
}

func (a *API) closeMCPSession(ws, id string) {
	if sc, ok := a.mcp.(SessionCloser); ok && id != "" {
		sc.CloseSession(ws, id)
	}
}

// resourceMetadataPrefix is where RFC 9728 puts a resource's metadata: the
// well-known name before the resource's path.
const resourceMetadataPrefix = "/.well-known/oauth-protected-resource"

// resourceMetadata is an OAuth 2.0 protected resource's metadata (RFC 9728
// section 2), the fields tether has.
type resourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	ResourceName           string   `json:"resource_name,omitempty"`
}

// handleResourceMetadata answers GET
// /.well-known/oauth-protected-resource/api/v1/workspaces/{id}/mcp, without
// a token: a client refused by the endpoint learns there where to get one.
func (a *API) handleResourceMetadata(c *gin.Context) {
	ws := c.Param("id")
	c.JSON(http.StatusOK, resourceMetadata{
		Resource:               a.resourceURL(c.Request, ws),
		AuthorizationServers:   a.cfg.OAuthIssuers,
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        a.cfg.OAuthScopes,
		ResourceName:           "tether workspace " + ws,
	})
}

// challenge sets a 401's WWW-Authenticate: where the resource's metadata
// is (RFC 9728 section 5.1) and, with --oauth-scope, the scopes to ask for
// (RFC 6750 section 3; the flag's values are checked to need no escaping).
func (a *API) challenge(c *gin.Context, ws string) {
	h := `Bearer resource_metadata="` + a.resourceMetadataURL(c.Request, ws) + `"`
	if len(a.cfg.OAuthScopes) > 0 {
		h += `, scope="` + strings.Join(a.cfg.OAuthScopes, " ") + `"`
	}
	c.Header("WWW-Authenticate", h)
}

// resourceURL is the MCP endpoint of workspace ws: under --public-url
// when the broker has one, else as the client reached it, the request's
// own scheme (TLS or not) and Host. X-Forwarded-* are not read: no proxy is
// trusted to say where the client connected. Without --public-url the
// client chooses the Host, so a provider token meant for another server
// with the same path and issuer would fit; --public-url (or
// --token-audience) closes that.
func (a *API) resourceURL(r *http.Request, ws string) string {
	return a.baseURL(r) + "/api/v1/workspaces/" + url.PathEscape(ws) + "/mcp"
}

func (a *API) resourceMetadataURL(r *http.Request, ws string) string {
	return a.baseURL(r) + resourceMetadataPrefix + "/api/v1/workspaces/" + url.PathEscape(ws) + "/mcp"
}

func (a *API) baseURL(r *http.Request) string {
	if a.cfg.PublicURL != "" {
		return a.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil || a.tls.Load() {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
