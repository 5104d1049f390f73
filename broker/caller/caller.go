// Package caller sends tool calls to workspaces and waits for their single
// answer. Backend workers use it over HTTP (HTTP) or directly on the broker's
// Redis (BusCaller); the broker's own HTTP API is built on BusCaller.
//
// Every Call returns exactly one ToolResponse, never an error value: failures
// of any kind (offline workspace, timeout, closed caller, transport trouble)
// come back as a response with a code from the protocol package.
package caller

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Request is one call.
type Request struct {
	WorkspaceID string
	Endpoint    string
	Payload     json.RawMessage
	// Timeout bounds the whole call; zero means protocol.DefaultTimeout.
	Timeout time.Duration
	// WaitForWorkspace is the longest the call waits for its workspace to
	// connect when nobody serves it. Zero answers workspace_offline at
	// once. When the wait ends the call is answered workspace_offline; a
	// wait longer than Timeout is cut by the deadline, which answers
	// timeout.
	WaitForWorkspace time.Duration
	// CorrelationID is generated when empty.
	CorrelationID string
	// IdempotencyKey, for Submit: a retried Submit with the same key and
	// workspace, within the retention, returns the call already made.
	IdempotencyKey string
}

// Caller is implemented by BusCaller and HTTP.
type Caller interface {
	Call(ctx context.Context, req Request) protocol.ToolResponse
}

func (r *Request) timeout() time.Duration {
	if r.Timeout == 0 {
		return time.Duration(protocol.DefaultTimeout * float64(time.Second))
	}
	return r.Timeout
}

// waitEnd is when a call made at start that waits for its offline
// workspace gives up, and the code it then answers: workspace_offline at the
// end of its wait, or timeout when the deadline comes first.
func (r *Request) waitEnd(start time.Time) (time.Time, string) {
	if r.WaitForWorkspace > r.timeout() {
		return start.Add(r.timeout()), protocol.CodeTimeout
	}
	return start.Add(r.WaitForWorkspace), protocol.CodeWorkspaceOffline
}
