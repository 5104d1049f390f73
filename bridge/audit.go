//go:build !windows

package bridge

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/protocol"
)

// The bridge's lines of the audit log (package audit, docs/audit.md): its
// connection to the broker (runSession: connect, connect_refused,
// disconnect) and every call it answers, whichever way it came (the
// dispatcher: audited). The bridge does not know the caller of a call
// from the broker: the broker's line with the same correlation_id names
// it.
//
// A handler adds what only it knows to its call's line with Call.Audit:
// the terminal its command line, the debugger its adapter. The dispatcher
// knows nothing of either.

// The doors of the bridge's lines (audit.Event.Door).
const (
	doorSocket    = "socket"     // from the broker
	doorLocalHTTP = "local_http" // the bridge's own HTTP listener (--http)
	doorInproc    = "inproc"     // Bridge.Dispatch
)

// callNote gathers what a call's handler adds to its audit line; it may
// be added to while the line is written (a handler past its deadline),
// hence mu.
type callNote struct {
	mu   sync.Mutex
	adds []func(*audit.Event)
}

type callNoteKey struct{}

// withNote gives the call served under ctx a note, when the audit log is
// on.
func (d *dispatcher) withNote(ctx context.Context) context.Context {
	if d.audit == nil {
		return ctx
	}
	return context.WithValue(ctx, callNoteKey{}, &callNote{})
}

// noteOf is the note of the call served under ctx; nil when the log is off.
func (d *dispatcher) noteOf(ctx context.Context) *callNote {
	if d.audit == nil {
		return nil
	}
	return noteFrom(ctx)
}

func noteFrom(ctx context.Context) *callNote {
	n, _ := ctx.Value(callNoteKey{}).(*callNote)
	return n
}

// Audit adds to the call's audit line: f sets the fields only the handler
// knows (audit.Event.Command, audit.Event.Adapter). It does nothing when
// the audit log is off. Never put a payload, a file's content or a secret
// there.
func (c *Call) Audit(f func(e *audit.Event)) {
	if c.note == nil {
		return
	}
	c.note.mu.Lock()
	c.note.adds = append(c.note.adds, f)
	c.note.mu.Unlock()
}

// audited writes the audit line of call, which came in by door at
// received and was answered resp: the one place the bridge's calls are
// audited.
func (d *dispatcher) audited(ctx context.Context, door string, call *protocol.ToolCall, received time.Time, resp *protocol.ToolResponse) {
	if d.audit == nil {
		return
	}
	e := audit.Event{Event: audit.Call, Door: door, Workspace: d.wsID, Endpoint: call.Endpoint, CorrelationID: call.CorrelationID,
		Outcome: audit.OutcomeOK, DurationMS: audit.Since(received)}
	if !resp.Success {
		e.Outcome = resp.Error
	}
	if n := noteFrom(ctx); n != nil {
		n.mu.Lock()
		for _, add := range n.adds {
			add(&e)
		}
		n.mu.Unlock()
	}
	d.audit.Emit(e)
}

// auditConnection writes a line about the connection to the broker:
// event, on session sid, for a connection held since (zero: none yet) that
// ended or failed with err.
func (b *Bridge) auditConnection(event, sid string, since time.Time, err error) {
	if b.d.audit == nil {
		return
	}
	e := audit.Event{Event: event, Door: doorSocket, Remote: b.brokerName(), Session: sid, Workspace: b.cfg.WorkspaceID}
	var ce *connectError
	switch {
	case event == audit.Connect:
		e.Outcome = audit.OutcomeOK
	case errors.As(err, &ce):
		e.Outcome, e.Reason = ce.code, ce.message
	case err != nil:
		e.Reason = err.Error()
	}
	if !since.IsZero() {
		e.DurationMS = audit.Since(since)
	}
	b.d.audit.Emit(e)
}

// brokerName is the broker's URL as configured, without a password.
func (b *Bridge) brokerName() string {
	if u, err := url.Parse(b.cfg.BrokerURL); err == nil && u.User != nil {
		return u.Redacted()
	}
	return b.cfg.BrokerURL
}

// transportDoor is the door of dispatch's transport names.
func transportDoor(transport string) string {
	if transport == "http" {
		return doorLocalHTTP
	}
	return transport
}

// auditing is respond, for a call from the broker, that writes the call's
// audit line first.
func (d *dispatcher) auditing(ctx context.Context, call *protocol.ToolCall, received time.Time, respond func(protocol.ToolResponse)) func(protocol.ToolResponse) {
	if d.audit == nil {
		return respond
	}
	return func(resp protocol.ToolResponse) {
		d.audited(ctx, doorSocket, call, received, &resp)
		respond(resp)
	}
}
