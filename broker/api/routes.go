package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// routes is net/http's side of the API: gin's routes, and /socket.io/ for
// the Engine.IO server.
func (a *API) routes() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.HandleMethodNotAllowed = true
	r.POST("/api/v1/workspaces/:id/calls", a.handleCall)
	r.GET("/api/v1/workspaces", a.handleList)
	r.GET("/api/v1/calls/:cid", a.handleCallStatus)
	r.POST("/api/v1/calls/:cid/cancel", a.handleCallCancel)
	r.POST("/api/v1/admin/revocations", a.handleRevoke)
	r.GET("/api/v1/admin/revocations", a.handleRevocations)
	if a.mcp != nil {
		r.Any("/api/v1/workspaces/:id/mcp", a.handleMCP)
		r.GET(resourceMetadataPrefix+"/api/v1/workspaces/:id/mcp", a.handleResourceMetadata)
	}
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok", "instance": a.cfg.InstanceID}) })
	r.GET("/readyz", func(c *gin.Context) {
		if err := a.core.Ready(c.Request.Context()); err != nil {
			c.JSON(http.StatusServiceUnavailable, gin.H{"status": "not ready", "reason": err.Error()})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	})
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(a.cfg.Registry, promhttp.HandlerOpts{})))
	r.NoRoute(func(c *gin.Context) {
		apiError(c, http.StatusNotFound, protocol.CodeInvalidRequest, "no such path: "+c.Request.URL.Path)
	})
	r.NoMethod(func(c *gin.Context) {
		apiError(c, http.StatusMethodNotAllowed, protocol.CodeInvalidRequest, "method not allowed: "+c.Request.Method)
	})

	mux := http.NewServeMux()
	mux.Handle("/socket.io/", a.cfg.Socket)
	mux.Handle("/", r)
	// Browsers of the listed origins reach the polling transport and the
	// API alike (cors.go).
	return CORS(a.cfg.CORSOrigins, mux)
}

// handleList answers GET /api/v1/workspaces: the workspaces of every
// instance that the token may call.
func (a *API) handleList(c *gin.Context) {
	claims, err := a.auth.Verify(bearer(c.Request), auth.RoleCaller, "")
	if err != nil {
		refuse(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), listWait)
	defer cancel()
	list, unanswered, err := a.core.AllWorkspaces(ctx)
	if err != nil {
		apiError(c, http.StatusServiceUnavailable, protocol.CodeBusUnavailable, "listing workspaces: "+err.Error())
		return
	}
	visible := make([]protocol.Workspace, 0, len(list))
	for _, w := range list {
		if claims.Allows(w.WorkspaceID) {
			visible = append(visible, w)
		}
	}
	c.JSON(http.StatusOK, gin.H{"workspaces": visible, "unanswered_instances": unanswered})
}

// listWait bounds how long GET /api/v1/workspaces waits for the other
// instances' answers; an instance that does not answer in time is counted
// in unanswered_instances.
const listWait = time.Second
