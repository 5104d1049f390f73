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
	// WaitForWorkspace holds the call while nobody serves the workspace, up
	// to the call's deadline, instead of answering workspace_offline at once.
	WaitForWorkspace bool
	// CorrelationID is generated when empty.
	CorrelationID string
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
