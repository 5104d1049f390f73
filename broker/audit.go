package broker

import (
	"time"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/broker/auth"
)

// The routing core's lines of the audit log (package audit, docs/audit.md):
// a workspace client's CONNECT accepted (handshake.go) or refused
// (connectError), its workspace taken by a newer connection (takeover),
// and the end of a connected client's connection (Ended). The calls' lines
// are the API's (broker/api/audit.go).

// doorSocket is the Door of a Socket.IO connection's lines.
const doorSocket = "socket"

// audit emits e with the connection's fields: its session, remote address,
// workspace and the principal its token named.
func (c *conn) audit(e audit.Event) {
	log := c.b.cfg.Audit
	if log == nil {
		return
	}
	e.Door, e.Session, e.Remote = doorSocket, c.s.ID(), c.s.Remote()
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

// connectedFor is how long the connection has held its workspace, in ms.
func (c *conn) connectedFor() float64 {
	if c.since == 0 {
		return 0
	}
	return audit.Since(time.Unix(0, c.since))
}
