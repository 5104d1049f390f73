// Package audit is tether's audit log: one JSON line per connection event
// and per call, for a security team asking who ran what on which
// workspace. The broker and the bridge both write it (--audit-log); this
// package owns the line's schema (Event: its field names live here and
// nowhere else) and the writer (Log), which never makes a call wait on
// the disk. docs/audit.md lists every event and field.
//
// A line never holds a token, a payload or a file's content: Event has
// no field that could take one.
package audit

import (
	"time"
)

// The events (Event.Event). Each is emitted at one place of the broker or
// the bridge; docs/audit.md says which and when.
const (
	// Connections of workspace clients (bridges) to the broker, and of the
	// bridge to its broker.
	Connect        = "connect"         // CONNECT accepted: token verified, workspace held
	ConnectRefused = "connect_refused" // CONNECT refused: Outcome is the code
	Replace        = "replace"         // a newer connection took this one's workspace
	Disconnect     = "disconnect"      // a connected client's connection ended; Reason says why

	// Calls.
	Call           = "call"            // a synchronous call answered (Outcome: ok or its code)
	CallRefused    = "call_refused"    // a call refused before it was made (Outcome: the code)
	AsyncSubmit    = "async_submit"    // an async call submitted (Outcome: accepted, its final status or a code)
	AsyncCancel    = "async_cancel"    // an async call's cancel asked for (Outcome: the record's status or a code)
	AsyncOutcome   = "async_outcome"   // an async call's outcome recorded by this broker (Outcome: ok or its code)
	AsyncStatus    = "async_status"    // an async call's record read (Outcome: its status, or a code)
	RevocationAdd  = "revocation_add"  // an admin revoked tokens
	RevocationList = "revocation_list" // an admin listed the revocations
)

// The doors (Event.Door): how a request came.
const (
	DoorHTTP      = "http"       // the broker's call API
	DoorMCP       = "mcp"        // an MCP tool call, or a request of the MCP endpoint
	DoorSocket    = "socket"     // a Socket.IO connection; on the bridge, a call from the broker
	DoorLocalHTTP = "local_http" // the bridge's own HTTP listener (--http)
	DoorInproc    = "inproc"     // the bridge's Dispatch, in-process
)

// OutcomeOK is the Outcome of a call that succeeded; any other outcome is
// an error code of the protocol (protocol.Code*) or, for async calls, a
// record status.
const OutcomeOK = "ok"

// Event is one line of the audit log. Its JSON field names are the
// log's schema: stable, documented in docs/audit.md; a field is added,
// never renamed. Empty fields are left out.
type Event struct {
	// Time is when the event happened (a call's: when it was answered),
	// written in RFC 3339 with nanoseconds, UTC. Zero: the time of Emit.
	Time time.Time `json:"time"`
	// Instance names the process: the broker's instance id, or the
	// bridge's. Component is "broker" or "bridge". Log sets both.
	Instance  string `json:"instance"`
	Component string `json:"component"`
	Event     string `json:"event"`
	// Door is how the request came (Door*).
	Door string `json:"door,omitempty"`
	// Remote is the client's address (behind trusted proxies, the client
	// X-Forwarded-For names); Session the Engine.IO session id.
	Remote    string     `json:"remote,omitempty"`
	Session   string     `json:"session,omitempty"`
	Principal *Principal `json:"principal,omitempty"`
	Workspace string     `json:"workspace_id,omitempty"`
	Endpoint  string     `json:"endpoint,omitempty"`
	// CorrelationID joins a call's lines: the broker's, the bridge's.
	CorrelationID string `json:"correlation_id,omitempty"`
	// Outcome is OutcomeOK, an error code or an async call's status.
	Outcome string `json:"outcome,omitempty"`
	// Status is the HTTP status of the answer, when there was one.
	Status int `json:"status,omitempty"`
	// DurationMS is how long the call or the connection took.
	DurationMS float64 `json:"duration_ms,omitempty"`
	// Reason is why a connection ended or a call was refused, in words.
	Reason string `json:"reason,omitempty"`
	// Command is the command line of a terminal call; Adapter the debug
	// adapter of a debug call (bridge only).
	Command string `json:"command,omitempty"`
	Adapter string `json:"adapter,omitempty"`
	// Revocation is what an admin revoked (RevocationAdd).
	Revocation *Revocation `json:"revocation,omitempty"`
}

// Principal is who acted: the verified token's subject, id, signing key
// and role. Never the token itself.
type Principal struct {
	Sub  string `json:"sub,omitempty"`
	JTI  string `json:"jti,omitempty"`
	KID  string `json:"kid,omitempty"`
	Role string `json:"role,omitempty"`
}

// Revocation is what a revocation covers: one token id, or a workspace's
// tokens issued before a time.
type Revocation struct {
	JTI          string     `json:"jti,omitempty"`
	Workspace    string     `json:"workspace_id,omitempty"`
	IssuedBefore *time.Time `json:"issued_before,omitempty"`
}

// Since is the duration from start to now in milliseconds, for DurationMS.
func Since(start time.Time) float64 {
	return float64(time.Since(start).Microseconds()) / 1000
}
