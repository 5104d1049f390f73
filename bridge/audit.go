//go:build !windows

package bridge

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/protocol"
)

// The bridge's lines of the audit log (package audit, docs/audit.md): its
// connection to the broker (runSession) and every call it answers,
// whichever way it came (dispatcher.audited). The broker's line with the
// same correlation_id names the caller, whom the bridge does not know. A
// handler adds what only it knows (a command line, a debug adapter) with
// Call.Audit, through the call's audit.Note.

// withNote gives the call served under ctx a note, when the log is on.
func (d *dispatcher) withNote(ctx context.Context) context.Context {
	if d.audit != nil {
		ctx = audit.WithNote(ctx)
	}
	return ctx
}

// Audit has f set the fields of the call's audit line that only the
// handler knows (audit.Event.Command, audit.Event.Adapter); nothing when
// the log is off. Never a payload, a file's content or a secret.
func (c *Call) Audit(f func(e *audit.Event)) { c.note.Add(f) }

// audited writes the line of call, which came in by door at received and
// was answered resp: the one place the bridge's calls are audited.
func (d *dispatcher) audited(ctx context.Context, door string, call *protocol.ToolCall, received time.Time, resp *protocol.ToolResponse) {
	if d.audit == nil {
		return
	}
	e := audit.Event{Event: audit.Call, Door: door, Workspace: d.wsID, Endpoint: call.Endpoint, CorrelationID: call.CorrelationID,
		Outcome: resp.Error, DurationMS: audit.Since(received)}
	if resp.Success {
		e.Outcome = audit.OutcomeOK
	}
	audit.NoteFrom(ctx).Apply(&e)
	d.audit.Emit(e)
}

// auditing is respond, for a call from the broker, writing the line first.
func (d *dispatcher) auditing(ctx context.Context, call *protocol.ToolCall, received time.Time, respond func(protocol.ToolResponse)) func(protocol.ToolResponse) {
	if d.audit == nil {
		return respond
	}
	return func(resp protocol.ToolResponse) {
		d.audited(ctx, audit.DoorSocket, call, received, &resp)
		respond(resp)
	}
}

// auditConnection writes a line of the connection to the broker: event,
// on session sid, held for heldMS, ended or refused with err.
func (b *Bridge) auditConnection(event, sid string, heldMS float64, err error) {
	if b.d.audit == nil {
		return
	}
	broker := b.cfg.BrokerURL
	if u, perr := url.Parse(broker); perr == nil && u.User != nil {
		broker = u.Redacted()
	}
	e := audit.Event{Event: event, Door: audit.DoorSocket, Remote: broker, Session: sid, Workspace: b.cfg.WorkspaceID, DurationMS: heldMS}
	var ce *connectError
	switch {
	case event == audit.Connect:
		e.Outcome = audit.OutcomeOK
	case errors.As(err, &ce):
		e.Outcome, e.Reason = ce.code, ce.message
	case err != nil:
		e.Reason = err.Error()
	}
	b.d.audit.Emit(e)
}
