package broker

import (
	"encoding/json"

	"github.com/tetherdev/tether/audit"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// The Socket.IO CONNECT handshake: the token (from the CONNECT payload or the
// upgrade's Authorization header) is checked for the workspace, the
// connection takes the workspace (takeover.go), and the client gets the
// CONNECT ack or a CONNECT_ERROR.

// connectAuth is the CONNECT packet's auth object. Members beyond these are
// ignored: IDE extensions' Socket.IO clients may put more in their auth
// (client names, versions), and refusing them would lock those clients
// out.
type connectAuth struct {
	Token       string `json:"token"`
	WorkspaceID string `json:"workspace_id"`
	Workspace   string `json:"workspace"`
}

// decodeConnectAuth reads the CONNECT auth object (data may be empty: no
// auth) and returns its token, or bearer when it has none, and its
// workspace ("workspace" is an older name of "workspace_id").
func decodeConnectAuth(data []byte, bearer string) (token, workspace string, err error) {
	var auth connectAuth
	if len(data) > 0 {
		if err := json.Unmarshal(data, &auth); err != nil {
			return "", "", err
		}
	}
	token = auth.Token
	if token == "" {
		token = bearer
	}
	workspace = auth.WorkspaceID
	if workspace == "" {
		workspace = auth.Workspace
	}
	return token, workspace, nil
}

func (c *conn) handleConnect(p protocol.SIOPacket) string {
	if p.Namespace != "/" {
		c.connectError(p.Namespace, "", "Invalid namespace", protocol.CodeInvalidRequest)
		return "" // the client may still connect to "/"
	}
	token, ws, err := decodeConnectAuth(p.Data, c.s.Bearer())
	if err != nil {
		c.connectError("/", "", "CONNECT auth must be an object with token and workspace_id", protocol.CodeInvalidRequest)
		return "bad CONNECT"
	}
	claims, err := c.b.auth.Verify(token, auth.RoleBridge, ws)
	c.notePrincipal(claims)
	if err == nil && ws == "" {
		if len(claims.Workspaces) == 1 && claims.Workspaces[0] != auth.AnyWorkspace {
			ws = claims.Workspaces[0]
		} else {
			err = protocol.Errorf(protocol.CodeInvalidRequest, "workspace_id is required")
		}
	}
	if err != nil {
		refusal := protocol.FailureFrom("", err, protocol.CodeUnauthorized)
		c.event(c.b.log.Info()).Str("workspace_id", ws).Str("code", refusal.Error).Msg("CONNECT refused: " + refusal.Message)
		c.connectError("/", ws, refusal.Message, refusal.Error)
		return "CONNECT refused"
	}
	// A revocation of the token ends the connection (its pending calls
	// are answered workspace_disconnected, as for any disconnect).
	untrack, ok := c.b.revoked.Track(claims, func() { c.close(ReasonRevoked, true) })
	if !ok { // revoked since Verify
		c.event(c.b.log.Info()).Str("workspace_id", ws).Str("code", protocol.CodeUnauthorized).Msg("CONNECT refused: " + auth.RevokedMessage)
		c.connectError("/", ws, auth.RevokedMessage, protocol.CodeUnauthorized)
		return "CONNECT refused"
	}
	c.mu.Lock()
	if c.closed { // Ended ran already: it found nothing to forget
		defer untrack()
	} else {
		c.untrack = untrack
	}
	c.mu.Unlock()
	// The token is good: no longer an anonymous handshake, whatever
	// registering brings.
	c.s.EndHandshake()
	if err := c.b.hold(c, ws); err != nil {
		c.event(c.b.log.Warn()).Err(err).Msg("registering workspace failed")
		c.connectError("/", ws, "broker cannot serve the workspace: "+err.Error(), protocol.CodeBrokerShutdown)
		return "register failed"
	}
	c.audit(audit.Event{Event: audit.Connect, Workspace: ws, Outcome: audit.OutcomeOK})
	return ""
}

// connectError refuses a CONNECT (to workspace ws, when known) with code:
// the one place a refusal is sent, and its audit line written.
func (c *conn) connectError(ns, ws, msg, code string) {
	c.audit(audit.Event{Event: audit.ConnectRefused, Workspace: ws, Outcome: code, Reason: msg})
	data, _ := json.Marshal(map[string]any{"message": msg, "data": map[string]string{"code": code}})
	_ = c.s.WriteNow(protocol.AppendMessage(nil, protocol.SIOPacket{Type: protocol.SIOConnectError, Namespace: ns, ID: protocol.NoAck, Data: data}))
}

// connected queues the CONNECT ack ahead of any call that arrived since the
// subscription started, then lets the writer run (eio.Session.Release).
func (c *conn) connected() bool {
	ack, _ := json.Marshal(map[string]string{"sid": c.s.ID()})
	return c.s.Release(protocol.AppendMessage(nil, protocol.SIOPacket{Type: protocol.SIOConnect, ID: protocol.NoAck, Data: ack}))
}
