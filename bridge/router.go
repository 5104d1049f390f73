//go:build !windows

package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/internal/strictjson"
	"github.com/tetherdev/tether/protocol"
)

// HandlerFunc serves one route. ctx ends at the handler deadline, on
// tool_cancel, on disconnect and on shutdown; c describes the call; req is the
// decoded payload. Return a *protocol.Error to choose the error code the
// caller sees. See the package documentation for the full contract.
type HandlerFunc[Req, Resp any] func(ctx context.Context, c *Call, req Req) (Resp, error)

// Handle mounts fn at path (gin syntax: "/api/terminal/sessions/:session_id/output")
// on r. The payload is decoded into Req strictly (internal/strictjson): a
// member Req has no field for, a value of the wrong type or anything after
// the payload object answers invalid_payload naming the member by its JSON
// path ("breakpoints[0].line") and, when one is close, the field it
// probably meant. Free-form parts of Req (maps, json.RawMessage) take any
// members. The returned Resp becomes the result; see the package
// documentation for how failures map to error codes.
//
// Handle must be called before the Bridge starts serving (Run, Dispatch or the
// HTTP handler); it panics after that, on a nil fn, and on a path gin rejects
// (malformed, or conflicting with a mounted route). Calls to Handle must not be
// concurrent with each other.
func Handle[Req, Resp any](r *Router, path string, fn HandlerFunc[Req, Resp]) {
	if fn == nil {
		panic("bridge: Handle " + path + " with a nil handler")
	}
	r.add(path, func(st *callState) {
		var req Req
		payload := st.call.payload
		if len(bytes.TrimSpace(payload)) == 0 {
			payload = emptyObject
		}
		if err := strictjson.Decode(payload, &req); err != nil {
			st.err = protocol.Errorf(protocol.CodeInvalidPayload, "decoding payload for %s: %v", st.call.route, err)
			return
		}
		if err := validate(&req); err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) {
				err = protocol.Errorf(protocol.CodeInvalidPayload, "%v", err)
			}
			st.err = err
			return
		}
		resp, err := fn(st.ctx, &st.call, req)
		if err != nil {
			st.err = err
			return
		}
		result, err := json.Marshal(resp)
		if err != nil {
			st.err = protocol.Errorf(protocol.CodeInternalError, "encoding result of %s: %v", st.call.route, err)
			return
		}
		st.result = result
	})
}

var emptyObject = json.RawMessage("{}")

// validator is the optional check a request type may carry; it runs after
// decoding so handlers only ever see requests that passed it.
type validator interface{ Validate() error }

func validate[Req any](req *Req) error {
	if v, ok := any(req).(validator); ok {
		return v.Validate()
	}
	if v, ok := any(*req).(validator); ok {
		return v.Validate()
	}
	return nil
}

// Router is the bridge's route table. Obtain it from Bridge.Router and mount
// routes with Handle before the Bridge starts serving. Once serving started
// the table is frozen and safe for concurrent use; Handle then panics.
type Router struct {
	engine *gin.Engine
	frozen atomic.Bool
	policy policy // read-only after newRouter

	mu     sync.Mutex // guards routes
	routes []string
}

func newRouter(p policy) *Router {
	// gin's default debug mode prints a banner and one line per route to
	// stdout; an explicit GIN_MODE from the operator still wins.
	if os.Getenv(gin.EnvGinMode) == "" && gin.Mode() == gin.DebugMode {
		gin.SetMode(gin.ReleaseMode)
	}
	e := gin.New() // no logger, no recovery: the dispatcher logs and recovers
	// A redirect is an answer no tool caller understands; a path that does not
	// match exactly is an unknown route.
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	// Keep %2F inside a path parameter from splitting it.
	e.UseRawPath = true
	e.UnescapePathValues = true
	r := &Router{engine: e, policy: p}
	e.NoRoute(func(gc *gin.Context) {
		if st := stateOf(gc); st != nil {
			st.err = protocol.Errorf(protocol.CodeUnknownRoute, "no route for endpoint %q", st.call.endpoint)
			st.routed = true
		}
	})
	return r
}

// Routes returns the mounted route paths in mounting order. Safe for
// concurrent use.
func (r *Router) Routes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.routes)
}

func (r *Router) add(path string, h func(*callState)) {
	if r.frozen.Load() {
		panic("bridge: Handle " + path + " after the bridge started serving")
	}
	if err := r.policy.refusal(path); err != nil {
		// Mounted all the same, so the caller learns why instead of
		// getting unknown_route; the payload is not even decoded.
		h = func(st *callState) { st.err = err }
	}
	r.engine.POST(path, func(gc *gin.Context) {
		st := stateOf(gc)
		if st == nil {
			// Only the dispatcher builds requests for this engine.
			gc.Status(http.StatusInternalServerError)
			return
		}
		st.routed = true
		st.call.route = gc.FullPath()
		// gin reuses its Params slice for the next request.
		st.call.params = append(st.call.params[:0], gc.Params...)
		h(st)
	})
	r.mu.Lock()
	r.routes = append(r.routes, path)
	r.mu.Unlock()
}

func (r *Router) freeze() {
	if !r.frozen.Load() {
		r.frozen.Store(true)
	}
}

// serve routes st through gin in memory. It runs the matched handler on the
// calling goroutine and returns when it does.
func (r *Router) serve(st *callState) {
	// ParseRequestURI, unlike url.Parse, keeps "//host/api/x" a path
	// instead of reading a host out of it.
	u, err := url.ParseRequestURI(st.call.endpoint)
	if err != nil {
		st.err = protocol.Errorf(protocol.CodeUnknownRoute, "endpoint %q is not a route path: %v", st.call.endpoint, err)
		return
	}
	req := &http.Request{
		Method:        http.MethodPost,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        jsonHeader,
		Body:          io.NopCloser(bytes.NewReader(st.call.payload)),
		ContentLength: int64(len(st.call.payload)),
		Host:          "bridge",
		RequestURI:    st.call.endpoint,
	}
	r.engine.ServeHTTP(&st.w, req.WithContext(context.WithValue(st.ctx, stateKey{}, st)))
	if !st.routed {
		st.err = protocol.Errorf(protocol.CodeUnknownRoute, "no route for endpoint %q", st.call.endpoint)
	}
}

// jsonHeader is shared read-only by every in-memory request; handlers see
// the payload through Call and never mutate request headers.
var jsonHeader = http.Header{"Content-Type": {"application/json"}}

type stateKey struct{}

func stateOf(gc *gin.Context) *callState {
	st, _ := gc.Request.Context().Value(stateKey{}).(*callState)
	return st
}

// Call describes the call a handler serves. It is valid only until the
// handler returns, and is not safe for use by goroutines the handler starts
// that outlive it.
type Call struct {
	correlationID string
	endpoint      string
	workspaceID   string
	route         string
	payload       json.RawMessage
	deadline      time.Time
	params        gin.Params
	log           callLog
	logger        *zerolog.Logger // built on first use: most handlers never log
	note          *audit.Note     // what the handler adds to the audit line (Audit); nil when off
}

// CorrelationID is the broker's id of this call; log it with anything the
// handler reports.
func (c *Call) CorrelationID() string { return c.correlationID }

// Endpoint is the endpoint as the caller sent it, e.g.
// "/api/terminal/sessions/s1/output".
func (c *Call) Endpoint() string { return c.endpoint }

// Route is the mounted pattern that matched, e.g.
// "/api/terminal/sessions/:session_id/output".
func (c *Call) Route() string { return c.route }

// WorkspaceID is the workspace this bridge serves.
func (c *Call) WorkspaceID() string { return c.workspaceID }

// Param returns the value of the path parameter name ("" if the route has
// none of that name), already unescaped.
func (c *Call) Param(name string) string { return c.params.ByName(name) }

// Payload returns the raw JSON payload, for handlers that need more than the
// decoded request. It must not be modified.
func (c *Call) Payload() json.RawMessage { return c.payload }

// Deadline is when the handler's ctx expires on its own; a handler that
// wants to answer with partial results can aim a little before it.
func (c *Call) Deadline() time.Time { return c.deadline }

// Logger returns a logger carrying correlation_id, endpoint and workspace_id.
func (c *Call) Logger() *zerolog.Logger {
	if c.logger == nil {
		l := c.log.l.With().Str("correlation_id", c.correlationID).Str("endpoint", c.endpoint).Logger()
		c.logger = &l
	}
	return c.logger
}

// callState carries one call through gin and back. The handler goroutine
// writes the outcome fields; the dispatcher reads them only after that
// goroutine signalled completion.
type callState struct {
	ctx    context.Context
	call   Call
	w      discardWriter
	routed bool
	result json.RawMessage
	err    error
}

// discardWriter satisfies gin: handlers answer through callState, so
// whatever gin itself writes (a 404 body) is dropped.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

func (w *discardWriter) WriteHeader(status int) { w.status = status }
