package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

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
// (missing or invalid, with WWW-Authenticate) or 403 (another workspace).
// A draining broker answers 503 broker_shutdown.
func (a *API) handleMCP(c *gin.Context) {
	ws := c.Param("id")
	if _, err := a.auth.Verify(bearer(c.Request), auth.RoleCaller, ws); err != nil {
		if authStatus(err) == http.StatusUnauthorized {
			c.Header("WWW-Authenticate", `Bearer realm="tether"`)
		}
		refuse(c, err)
		return
	}
	if a.core.Draining() {
		apiError(c, http.StatusServiceUnavailable, protocol.CodeBrokerShutdown, "broker is shutting down")
		return
	}
	if err := a.mcp.ServeWorkspace(c.Writer, c.Request, ws); err != nil {
		apiError(c, http.StatusServiceUnavailable, protocol.CodeBrokerShutdown, "MCP endpoint: "+err.Error())
	}
}
