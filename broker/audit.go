package broker

import (
	"time"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/store"
)

// The routing core's lines of the audit log (package audit, docs/audit.md):
// a workspace client's CONNECT accepted (handshake.go) or refused
// (connectError), its workspace taken by a newer connection (takeover),
// the end of a connected client's connection (Ended), and the outcome of
// an async call this broker recorded (auditOutcome, told by package
// async). The calls' lines are the API's (broker/api/audit.go).

// audit emits e with the connection's fields: its session, remote address,
// workspace and the principal its token named.
func (c *conn) audit(e audit.Event) {
	log := c.b.cfg.Audit
	if log == nil {
		return
	}
	e.Door, e.Session, e.Remote = audit.DoorSocket, c.s.ID(), c.s.Remote()
	if e.Workspace == "" {
		e.Workspace = c.WorkspaceID()
	}
	e.Principal = c.principal.Load()
	log.Emit(e)
}

// notePrincipal keeps who claims name for the connection's lines: a
// refused token with a good signature names its principal too.
func (c *conn) notePrincipal(claims *auth.Claims) {
	if c.b.cfg.Audit != nil && claims != nil {
		c.principal.Store(claims.Principal())
	}
}

// auditOutcome writes the line of an async call's outcome, recorded by
// this broker (package async); its submit's line names who made it.
func (b *Broker) auditOutcome(rec *store.Record) {
	if b.cfg.Audit == nil {
		return
	}
	e := audit.Event{Event: audit.AsyncOutcome, Workspace: rec.WorkspaceID, Endpoint: rec.Endpoint, CorrelationID: rec.CorrelationID,
		Outcome: rec.Status, DurationMS: audit.Since(rec.CreatedAt)}
	if r := rec.Response; r != nil {
		e.Outcome = audit.OutcomeOK
		if !r.Success {
			e.Outcome = r.Error
		}
	}
	b.cfg.Audit.Emit(e)
}

// connectedFor is how long the connection has held its workspace, in ms.
func (c *conn) connectedFor() float64 {
	if c.since == 0 {
		return 0
	}
	return audit.Since(time.Unix(0, c.since))
}
