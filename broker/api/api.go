// Package api is the broker's HTTP API for callers: POST
// /api/v1/workspaces/{id}/calls (synchronous and async), the async calls'
// GET and cancel, GET /api/v1/workspaces, the MCP endpoint's door, the
// admin's revocations (admin.go), and /healthz, /readyz, /metrics. Two servers answer it: net/http through gin
// (routes.go), and the call server (server.go), which reads and writes the
// hot requests itself. Both take every rule about a call from the same
// code: a call's body is accepted by acceptCall, a synchronous call starts
// with begin and ends with end (call.go), an async one goes through submit
// (async.go), and a token is checked by the broker's auth.Verifier.
//
// The API does not route calls itself: it asks the routing core (Core),
// which the broker package gives it, and the bus caller. It never imports
// the core; whoever wires both mounts one into the other.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/proxy"
	"github.com/tetherdev/tether/broker/revoke"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Core is what the API needs of the routing core (package broker).
type Core interface {
	// Draining reports whether the broker is shutting down.
	Draining() bool
	// Dispatch starts a synchronous call of the API for ws without
	// waiting for it, when the call needs no bus: to the connection of
	// this process holding ws, which it returns, or answered at once
	// (holder nil: the workspace is offline on the in-memory bus). The
	// one answer goes to w. It gives call a correlation id if it has
	// none. ok is false when the call must go through the bus; nothing
	// was done then. span is the call's span (nil when it has none): a
	// holder in this process records the delivery as an event on it, not
	// as a span of its own (docs/design.md, Tracing).
	Dispatch(ws string, call *protocol.ToolCall, w caller.Waiter, span trace.Span) (holder Holder, ok bool)
	// Submit records an async call for ws and starts it: handed to the
	// connection of this broker that holds ws when there is one (and,
	// with wait > 0 and no id or key of the caller's, recorded once with
	// its outcome if that comes within wait: waited), else queued in the
	// store for the holder anywhere to drain.
	Submit(ctx context.Context, ws string, req caller.Request, wait time.Duration) (rec store.Record, waited bool, err error)
	// AllWorkspaces asks every instance for the workspaces it holds;
	// unanswered counts the instances that did not answer before ctx
	// ended.
	AllWorkspaces(ctx context.Context) (list []protocol.Workspace, unanswered int, err error)
	// Ready reports whether the broker can route calls.
	Ready(ctx context.Context) error
}

// Holder is the connection of this broker that a call was handed to.
type Holder interface {
	// CancelCall ends the call cid with cancelled (the workspace client
	// gets tool_cancel); false when it had already ended.
	CancelCall(cid, reason string) bool
	// WorkspaceID is the workspace the connection holds.
	WorkspaceID() string
}

// Caller is the broker's own call path as the MCP tools use it (API.Call).
type Caller interface {
	Call(ctx context.Context, req caller.Request) protocol.ToolResponse
}

// Mount serves the MCP endpoint, /api/v1/workspaces/{id}/mcp, for the
// workspace ws of a request the API has authorised (package mcp's
// Endpoint). ServeWorkspace returns an error, having written nothing, when
// it cannot serve (closed); the API answers 503 then. Close ends its
// sessions; it is called once, at shutdown.
type Mount interface {
	ServeWorkspace(w http.ResponseWriter, r *http.Request, ws string) error
	Close()
}

// Config configures an API. Every field is required but MCP.
type Config struct {
	Core     Core
	Caller   *caller.BusCaller
	Verifier *auth.Verifier
	// Revocations is the Verifier's list of revoked tokens: the admin
	// routes add to it and list it, and an MCP request or stream is
	// tracked there, so that revoking its token ends it.
	Revocations *revoke.List
	// Registry gets the API's metrics; /metrics serves it.
	Registry *prometheus.Registry
	// Socket serves /socket.io/ (the Engine.IO server).
	Socket http.Handler
	// MCP makes the MCP endpoint's server, given the API's call path;
	// nil: there is none (its path answers 404).
	MCP func(Caller) Mount
	// OAuthIssuers are the authorization servers the MCP endpoint's
	// protected-resource metadata names.
	OAuthIssuers []string
	// OAuthScopes are the scopes the metadata and the 401 challenge
	// name.
	OAuthScopes []string
	// PublicURL is the broker's base URL as clients reach it; the MCP
	// endpoint's resource URL starts with it. Empty: the request's own
	// scheme and Host.
	PublicURL  string
	InstanceID string
	Logger     zerolog.Logger
	MaxPayload int
	// WriteTimeout bounds writing one answer; CallGrace is how long past a
	// call's deadline the API waits for the owner's answer before it
	// answers timeout itself.
	WriteTimeout time.Duration
	CallGrace    time.Duration
	// CORSOrigins are the browser origins allowed (CORS); none: no CORS
	// header is ever sent.
	CORSOrigins []string
	// Audit is the audit log the API's requests are written to
	// (audit.go); nil: none. Trust says which client a request is from
	// there (X-Forwarded-For of trusted proxies).
	Audit *audit.Log
	Trust proxy.Trust
}

// API serves the caller HTTP API. Create it with New; all methods are
// safe for concurrent use.
type API struct {
	cfg     Config
	core    Core
	caller  *caller.BusCaller
	auth    *auth.Verifier
	revoked *revoke.List
	log     zerolog.Logger
	metrics *metrics
	mcp     Mount // nil: no MCP endpoint
	handler http.Handler
	// tls: a Server serves this API over TLS (NewServer with a TLS
	// config), so every request came over TLS, whether net/http saw its
	// *tls.Conn (r.TLS) or got the connection from the call server.
	tls atomic.Bool

	calls    sync.WaitGroup // requests that wait on a call or the store
	inFlight atomic.Int64   // synchronous calls begun and not ended
}

// New returns the API; its Handler serves it.
func New(cfg Config) *API {
	a := &API{cfg: cfg, core: cfg.Core, caller: cfg.Caller, auth: cfg.Verifier, revoked: cfg.Revocations, log: cfg.Logger, metrics: newMetrics(cfg.Registry)}
	if cfg.MCP != nil {
		a.mcp = cfg.MCP(a)
	}
	a.handler = a.routes()
	return a
}

// Handler serves /socket.io/ (Config.Socket) and the HTTP API.
func (a *API) Handler() http.Handler { return a.handler }

// InFlight counts the synchronous calls of the API not answered yet.
func (a *API) InFlight() int64 { return a.inFlight.Load() }

// Wait waits for the requests that wait on a call or on the store.
// Shutdown calls it once the core answered every call it could.
func (a *API) Wait() { a.calls.Wait() }

// Close ends the MCP endpoint's sessions; later MCP requests are refused.
func (a *API) Close() {
	if a.mcp != nil {
		a.mcp.Close()
	}
}

// writer is where a handler of the API writes its one answer: gin's
// Context, or the call server's connection (server_conn.go), which serves
// POST .../calls without net/http. Header adds a header to the answer;
// Data writes it.
type writer interface {
	Header(key, value string)
	Data(code int, contentType string, data []byte)
}

// apiError answers a request that never became a call.
func apiError(w writer, status int, code, msg string) {
	body, _ := json.Marshal(protocol.ToolResponse{Error: code, Message: msg})
	w.Data(status, "application/json; charset=utf-8", body)
}

// refuse answers a request whose token auth refused (err from Verify):
// 403 for a valid token that does not cover the request, else 401.
func refuse(w writer, err error) {
	refusal := protocol.FailureFrom("", err, protocol.CodeUnauthorized)
	apiError(w, authStatus(err), refusal.Error, refusal.Message)
}

func authStatus(err error) int {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeForbidden {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

func bearer(r *http.Request) string { return bearerOf(r.Header.Get("Authorization")) }

// bearerOf is the token of an Authorization header's value.
func bearerOf(h string) string {
	if strings.HasPrefix(h, "Bearer ") {
		return strings.TrimSpace(h[len("Bearer "):])
	}
	return ""
}
