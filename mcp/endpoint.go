package mcp

import (
	"errors"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// Endpoint serves the tools of every workspace over the MCP streamable
// HTTP transport: a broker mounts it at /api/v1/workspaces/{id}/mcp
// (api.Config.MCP) and hands it each request it has authorised, with its
// workspace.
//
// Each workspace has its own Server and streamable handler, so an MCP
// session belongs to the workspace it was opened on: its id means nothing
// under another workspace's path (404). Any number of sessions may be open
// at once. The SDK's DNS-rebinding protection stays on: a request that
// reached a loopback listener with a Host that is not loopback is refused
// (403).
//
// Its methods are safe for concurrent use.
type Endpoint struct {
	opts EndpointOptions

	mu         sync.Mutex
	workspaces map[string]*endpointWorkspace
	closed     bool
}

// EndpointOptions configure an Endpoint.
type EndpointOptions struct {
	// Caller makes the tools' tether calls (the broker's own call path);
	// required.
	Caller Caller
	// MaxRequestBody bounds a request's body (a payload plus the JSON-RPC
	// envelope).
	MaxRequestBody int64
	Version        string
	Logger         zerolog.Logger
}

type endpointWorkspace struct {
	server  *Server
	handler *sdk.StreamableHTTPHandler
}

// Bounds of the endpoint.
const (
	// endpointIdle closes a session that made no request for this long (a
	// client that went away without DELETE); the client opens a new one.
	endpointIdle = time.Hour
	// endpointWorkspacesKept: past this many workspaces, those without an
	// open session are dropped.
	endpointWorkspacesKept = 256
)

// ErrEndpointClosed is what ServeWorkspace returns once the endpoint is
// closed.
var ErrEndpointClosed = errors.New("the MCP endpoint is closed")

// NewEndpoint returns an Endpoint.
func NewEndpoint(opts EndpointOptions) *Endpoint { return &Endpoint{opts: opts} }

// ServeWorkspace serves one HTTP request of an MCP session on workspace
// ws. It returns an error, having written nothing, when it cannot serve.
func (e *Endpoint) ServeWorkspace(w http.ResponseWriter, r *http.Request, ws string) error {
	ew, err := e.workspace(ws)
	if err != nil {
		return err
	}
	ew.handler.ServeHTTP(w, r)
	return nil
}

// workspace returns the MCP server of ws, made on first use.
func (e *Endpoint) workspace(ws string) (*endpointWorkspace, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrEndpointClosed
	}
	if w := e.workspaces[ws]; w != nil {
		return w, nil
	}
	if e.workspaces == nil {
		e.workspaces = make(map[string]*endpointWorkspace)
	}
	if len(e.workspaces) >= endpointWorkspacesKept {
		for id, w := range e.workspaces {
			if w.server.Sessions() == 0 {
				delete(e.workspaces, id)
			}
		}
	}
	srv, err := New(Options{Caller: e.opts.Caller, Workspace: ws, Version: e.opts.Version, Logger: e.opts.Logger})
	if err != nil {
		return nil, err
	}
	w := &endpointWorkspace{server: srv, handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv.SDK() }, &sdk.StreamableHTTPOptions{
		SessionTimeout:      endpointIdle,
		MaxRequestBodyBytes: e.opts.MaxRequestBody,
	})}
	e.workspaces[ws] = w
	return w, nil
}

// CloseSession ends the session id of workspace ws, if it is open: its
// event streams end and its tool calls in flight are cancelled (the broker
// calls it when the token the session used is revoked).
func (e *Endpoint) CloseSession(ws, id string) {
	e.mu.Lock()
	w := e.workspaces[ws]
	e.mu.Unlock()
	if w == nil {
		return
	}
	for ss := range w.server.SDK().Sessions() {
		if ss.ID() == id {
			_ = ss.Close()
		}
	}
}

// Close ends every MCP session (their event streams end, so the HTTP
// server's shutdown need not wait for them); later requests are refused.
func (e *Endpoint) Close() {
	e.mu.Lock()
	e.closed = true
	list := make([]*endpointWorkspace, 0, len(e.workspaces))
	for _, w := range e.workspaces {
		list = append(list, w)
	}
	e.mu.Unlock()
	for _, w := range list {
		w.server.Close()
	}
}
