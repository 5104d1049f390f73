package broker

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/tetherdev/tether/broker/auth"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/mcp"
	"github.com/tetherdev/tether/protocol"
)

// The MCP endpoint: /api/v1/workspaces/{id}/mcp serves the tools of package
// mcp for workspace id over the MCP streamable HTTP transport, to agents
// that speak MCP (Claude Code, Cursor, VS Code, any MCP SDK).
//
// Every HTTP request (POST, the GET event stream, DELETE) is authorised as
// a call is: a caller token (Bearer) covering the workspace, else 401
// (missing or invalid) or 403 (another workspace). The SDK's DNS-rebinding
// protection stays on: a request that reached a loopback listener with a
// Host that is not loopback is refused (403).
//
// Each workspace has its own mcp.Server and streamable handler, so an MCP
// session belongs to the workspace it was opened on: its id means nothing
// under another workspace's path (404). Any number of sessions may be open
// at once. Tool calls take the broker's own call path (route), as calls of
// the HTTP API do: a tool call the client cancels cancels its tether call,
// and the workspace gets tool_cancel.

// mcpEndpoint holds the MCP servers of the workspaces agents opened
// sessions on. Its methods are safe for concurrent use; the zero value is
// ready.
type mcpEndpoint struct {
	mu         sync.Mutex
	workspaces map[string]*mcpWorkspace
	closed     bool
}

type mcpWorkspace struct {
	server  *mcp.Server
	handler *sdk.StreamableHTTPHandler
}

// Bounds of the MCP endpoint.
const (
	// mcpIdle closes a session that made no request for this long (a
	// client that went away without DELETE); the client opens a new one.
	mcpIdle = time.Hour
	// mcpWorkspacesKept: past this many workspaces, those without an open
	// session are dropped.
	mcpWorkspacesKept = 256
)

func (b *Broker) handleMCP(c *gin.Context) {
	ws := c.Param("id")
	if _, err := b.auth.Verify(bearer(c.Request), auth.RoleCaller, ws); err != nil {
		refusal := protocol.FailureFrom("", err, protocol.CodeUnauthorized)
		status := authStatus(err)
		if status == http.StatusUnauthorized {
			c.Header("WWW-Authenticate", `Bearer realm="tether"`)
		}
		apiError(c, status, refusal.Error, refusal.Message)
		return
	}
	w, err := b.mcp.workspace(b, ws)
	if err != nil || b.isDraining() {
		apiError(c, http.StatusServiceUnavailable, protocol.CodeBrokerShutdown, "broker is shutting down")
		return
	}
	w.handler.ServeHTTP(c.Writer, c.Request)
}

var errMCPClosed = errors.New("the MCP endpoint is closed")

// workspace returns the MCP server of ws, made on first use.
func (e *mcpEndpoint) workspace(b *Broker, ws string) (*mcpWorkspace, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errMCPClosed
	}
	if w := e.workspaces[ws]; w != nil {
		return w, nil
	}
	if e.workspaces == nil {
		e.workspaces = make(map[string]*mcpWorkspace)
	}
	if len(e.workspaces) >= mcpWorkspacesKept {
		for id, w := range e.workspaces {
			if w.server.Sessions() == 0 {
				delete(e.workspaces, id)
			}
		}
	}
	srv, err := mcp.New(mcp.Options{Caller: brokerCaller{b}, Workspace: ws, Logger: b.log})
	if err != nil {
		return nil, err
	}
	w := &mcpWorkspace{server: srv, handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv.SDK() }, &sdk.StreamableHTTPOptions{
		SessionTimeout:      mcpIdle,
		MaxRequestBodyBytes: int64(b.cfg.MaxPayload) + 64<<10, // a payload plus the JSON-RPC envelope
	})}
	e.workspaces[ws] = w
	return w, nil
}

// close ends every MCP session (their event streams end, so the HTTP
// server's shutdown need not wait for them); later requests are refused.
func (e *mcpEndpoint) close() {
	e.mu.Lock()
	e.closed = true
	list := make([]*mcpWorkspace, 0, len(e.workspaces))
	for _, w := range e.workspaces {
		list = append(list, w)
	}
	e.mu.Unlock()
	for _, w := range list {
		w.server.Close()
	}
}

// brokerCaller makes the MCP tools' tether calls on the broker's own call
// path. The MCP endpoint authorised the request the tool call came in.
type brokerCaller struct{ b *Broker }

var _ mcp.Caller = brokerCaller{}

func (bc brokerCaller) Call(ctx context.Context, req caller.Request) protocol.ToolResponse {
	start := time.Now()
	call := protocol.ToolCall{CorrelationID: uuid.NewString(), Endpoint: req.Endpoint, Payload: req.Payload, Timeout: req.Timeout.Seconds()}
	var resp protocol.ToolResponse
	if err := call.Validate(); err != nil {
		resp = protocol.FailureFrom(call.CorrelationID, err, protocol.CodeInvalidRequest)
	} else {
		resp = bc.b.route(ctx, req.WorkspaceID, call)
	}
	bc.b.observe(start, resp)
	return resp
}
