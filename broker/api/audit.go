package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// The API's lines of the audit log (package audit, docs/audit.md): one per
// call request (synchronous or async, answered or refused), per read or
// cancel of an async call, per MCP tool call and per admin action, with who (the token's
// principal, never the token), from where (the client's address, behind
// trusted proxies the one X-Forwarded-For names) and what came of it.
//
// A request of the call API carries a note (callNote) from its door to its
// answer: the steps of the call path fill it in (notePrincipal, noteCall,
// noteAnswer, noteRecord) and every answer of such a request goes through
// its writer's Data, which writes the line (answered): net/http's requests
// through auditWriter, the call server's through callConn.Data. An MCP
// tool call's line is written by Call, with the note its MCP request put
// in the context (handleMCP). When the log is off there is no note and
// nothing is computed.

// callNote is what the audit line of one request says.
type callNote struct {
	event     string
	door      string
	start     time.Time
	remote    string
	workspace string
	principal *audit.Principal
	endpoint  string
	cid       string
	outcome   string
}

// newNote is the note of a request, nil when the audit log is off.
func (a *API) newNote(event, door, remote, ws, cid string, start time.Time) *callNote {
	if a.cfg.Audit == nil {
		return nil
	}
	return &callNote{event: event, door: door, start: start, remote: remote, workspace: ws, cid: cid}
}

// auditWriter is a net/http request's writer with its note.
type auditWriter struct {
	writer
	a *API
	n *callNote
}

// Data writes the answer, then its audit line.
func (w auditWriter) Data(code int, contentType string, data []byte) {
	w.writer.Data(code, contentType, data)
	w.a.answered(w.n, code, data)
}

// noted is c as the writer of a request with an audit line (event, for
// workspace ws or the call cid); c itself when the log is off.
func (a *API) noted(c *gin.Context, event, ws, cid string, start time.Time) writer {
	if a.cfg.Audit == nil { // before the client address is worked out
		return c
	}
	n := a.newNote(event, audit.DoorHTTP, a.cfg.Trust.Client(c.Request), ws, cid, start)
	return auditWriter{writer: c, a: a, n: n}
}

// connNote is the note of the call server's request h, nil when the log
// is off.
func (a *API) connNote(c *callConn, h *callHead) *callNote {
	if a.cfg.Audit == nil {
		return nil
	}
	var forwarded []string
	for _, v := range h.forwarded {
		forwarded = append(forwarded, string(v))
	}
	remote := a.cfg.Trust.ClientOf(c.nc.RemoteAddr().String(), forwarded)
	switch h.route {
	case routeCall:
		return a.newNote(audit.Call, audit.DoorHTTP, remote, h.id, "", c.start)
	case routeCancel:
		return a.newNote(audit.AsyncCancel, audit.DoorHTTP, remote, "", h.id, c.start)
	case routeStatus:
		return a.newNote(audit.AsyncStatus, audit.DoorHTTP, remote, "", h.id, c.start)
	}
	return nil
}

// noteOf is the note of the request w answers; nil when none.
func noteOf(w writer) *callNote {
	switch w := w.(type) {
	case auditWriter:
		return w.n
	case *callConn:
		return w.note
	}
	return nil
}

// notePrincipal records who the request's token names: also when the
// token was refused, if its signature was good.
func notePrincipal(w writer, claims *auth.Claims) {
	if n := noteOf(w); n != nil && claims != nil {
		n.principal = claims.Principal()
	}
}

// noteCall records the call a request asks for, once its body is accepted.
func noteCall(w writer, req *protocol.ToolCall, async bool) {
	if n := noteOf(w); n != nil {
		n.endpoint, n.cid = req.Endpoint, req.CorrelationID
		if async {
			n.event = audit.AsyncSubmit
		}
	}
}

// noteAnswer records a synchronous call's answer.
func noteAnswer(w writer, resp *protocol.ToolResponse) {
	if n := noteOf(w); n != nil {
		n.cid, n.outcome = resp.CorrelationID, outcomeOf(resp)
	}
}

// noteRecord records the async call a request submitted or cancelled:
// its id, workspace and status.
func noteRecord(w writer, rec *store.Record) {
	if n := noteOf(w); n != nil {
		n.cid, n.outcome = rec.CorrelationID, rec.Status
		if n.workspace == "" {
			n.workspace = rec.WorkspaceID
		}
		if n.endpoint == "" {
			n.endpoint = rec.Endpoint
		}
	}
}

func outcomeOf(resp *protocol.ToolResponse) string {
	if resp.Success {
		return audit.OutcomeOK
	}
	return resp.Error
}

// answered writes the audit line of a request answered with status and
// body: the one place the API's HTTP answers are audited. An answer with
// an error status is a refusal; its outcome is the error object's code.
func (a *API) answered(n *callNote, status int, body []byte) {
	if n == nil {
		return
	}
	event, outcome := n.event, n.outcome
	if status >= 400 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &e) // the API's own error object (apiError)
		outcome = e.Error
		if event == audit.Call {
			event = audit.CallRefused
		}
	}
	a.cfg.Audit.Emit(audit.Event{Event: event, Door: n.door, Remote: n.remote, Principal: n.principal, Workspace: n.workspace,
		Endpoint: n.endpoint, CorrelationID: n.cid, Outcome: outcome, Status: status, DurationMS: audit.Since(n.start)})
}

// mcpNoteKey is the context key of an MCP request's note.
type mcpNoteKey struct{}

// withMCPNote gives the MCP request c, authorised by claims for ws, a note
// its tool calls' lines take their door, client and principal from.
func (a *API) withMCPNote(ctx context.Context, c *gin.Context, ws string, claims *auth.Claims) context.Context {
	n := a.newNote(audit.Call, audit.DoorMCP, a.cfg.Trust.Client(c.Request), ws, "", time.Time{})
	if n == nil {
		return ctx
	}
	n.principal = claims.Principal()
	return context.WithValue(ctx, mcpNoteKey{}, n)
}

// admin writes the audit line of an admin action done (event), by claims.
func (a *API) admin(c *gin.Context, event string, claims *auth.Claims, rev *audit.Revocation) {
	if a.cfg.Audit == nil {
		return
	}
	a.cfg.Audit.Emit(audit.Event{Event: event, Door: audit.DoorHTTP, Remote: a.cfg.Trust.Client(c.Request), Principal: claims.Principal(),
		Outcome: audit.OutcomeOK, Revocation: rev})
}

// mcpCalled writes the audit line of an MCP tool call (Call).
func (a *API) mcpCalled(ctx context.Context, ws string, call *protocol.ToolCall, resp *protocol.ToolResponse, start time.Time) {
	if a.cfg.Audit == nil {
		return
	}
	e := audit.Event{Event: audit.Call, Door: audit.DoorMCP, Workspace: ws, Endpoint: call.Endpoint, CorrelationID: resp.CorrelationID,
		Outcome: outcomeOf(resp), DurationMS: audit.Since(start)}
	if n, ok := ctx.Value(mcpNoteKey{}).(*callNote); ok {
		e.Remote, e.Principal = n.remote, n.principal
	}
	if e.CorrelationID == "" {
		e.CorrelationID = call.CorrelationID
	}
	a.cfg.Audit.Emit(e)
}

// refusedAt writes the audit line of a request at door refused by its
// token check before it became a call (the MCP endpoint's, the admin
// routes').
func (a *API) refusedAt(c *gin.Context, event, door, ws string, claims *auth.Claims, err error) {
	if a.cfg.Audit == nil {
		return
	}
	a.cfg.Audit.Emit(audit.Event{Event: event, Door: door, Remote: a.cfg.Trust.Client(c.Request), Principal: claims.Principal(),
		Workspace: ws, Outcome: protocol.FailureFrom("", err, protocol.CodeUnauthorized).Error, Status: authStatus(err)})
}
