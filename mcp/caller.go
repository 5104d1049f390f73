package mcp

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

// Caller makes tether calls: one ToolResponse per call, never an error value
// (the broker/caller contract). *caller.HTTP satisfies it (tether mcp over
// stdio relays to a broker); the broker's MCP endpoint passes its own call
// path. A call must end when ctx ends, so that a tool call the MCP client
// cancels cancels its tether call, and the workspace gets tool_cancel.
type Caller interface {
	Call(ctx context.Context, req caller.Request) protocol.ToolResponse
}

var _ Caller = (*caller.HTTP)(nil)

// call sends one tether call to the tool's workspace and decodes a
// successful result into out (nil: ignored). A failed call comes back as a
// *toolError carrying the tether code, its message and the next step.
//
// timeout bounds the call; it is cut to what is left of the tool call's own
// deadline, so a tool with several calls still ends by that deadline.
func (tc *toolCall) call(ctx context.Context, endpoint string, payload any, timeout time.Duration, out any) error {
	body, err := json.Marshal(payload)
	if err != nil {
		// Payloads are built from decoded tool arguments: plain values.
		return &toolError{Code: protocol.CodeInvalidRequest, Message: "encoding the payload: " + err.Error()}
	}
	timeout = min(timeout, time.Duration(protocol.MaxTimeout*float64(time.Second)))
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout < minCallTimeout {
		return &toolError{Code: protocol.CodeTimeout, Message: "the tool call's time ran out before " + endpoint}
	}
	resp := tc.s.opts.Caller.Call(ctx, caller.Request{
		WorkspaceID: tc.s.opts.Workspace,
		Endpoint:    endpoint,
		Payload:     body,
		Timeout:     timeout,
	})
	tc.calls++
	switch {
	case !resp.Success && ctx.Err() != nil && resp.Error == protocol.CodeCancelled:
		return &toolError{Code: resp.Error, Message: "the tool call was cancelled; the workspace was told to stop"}
	case !resp.Success && resp.Error == "":
		return &toolError{Code: protocol.CodeInternalError, Message: resp.Message}
	case !resp.Success:
		return &toolError{Code: resp.Error, Message: resp.Message}
	}
	if out != nil && len(resp.Result) > 0 {
		if err := json.Unmarshal(resp.Result, out); err != nil {
			// An IDE extension or a bridge of another version.
			return &toolError{Code: protocol.CodeInternalError, Message: "the workspace answered a result tether cannot read (" + endpoint + "): " + err.Error()}
		}
	}
	return nil
}

// minCallTimeout is the least time a tether call is given: the broker
// refuses timeouts under 0.1 s.
const minCallTimeout = 100 * time.Millisecond
