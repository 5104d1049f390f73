//go:build !windows

package dap

import (
	"context"
	"fmt"
	"regexp"

	"github.com/tetherdev/tether/protocol"
)

// Watchpoints are DAP data breakpoints: each expression or address is
// turned into the adapter's data id (dataBreakpointInfo, in the stopped
// thread's frame a snapshot shows: stopFrame), then the whole set is sent
// (setDataBreakpoints).
// Only adapters that advertise supportsDataBreakpoints take them; the rest
// answer unsupported naming those that do.

// watchpointAdapters names the adapters whose data breakpoints work here
// (delve's DAP server does not offer them), for the unsupported answer.
const watchpointAdapters = "lldb-dap (C, C++, Rust)"

// watchNamer is an adapter whose dataBreakpointInfo wants an expression
// spelled its own way: watchName is the name to send for an lvalue
// expression, watchAddress for size bytes at a hex address.
type watchNamer interface {
	watchName(expr string) string
	watchAddress(addr string, size int) string
}

var hexAddress = regexp.MustCompile(`^0[xX][0-9a-fA-F]{1,16}$`)

// validWatchpoints checks a request's watchpoints, naming the field at fault.
func validWatchpoints(wps []Watchpoint) error {
	for i, w := range wps {
		field := fmt.Sprintf("watchpoints[%d]", i)
		switch {
		case (w.Expression == "") == (w.Address == ""):
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s: give exactly one of expression and address", field)
		case w.Address != "" && !hexAddress.MatchString(w.Address):
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s.address %q is not a hex address like 0x7ffd1234", field, w.Address)
		case w.Size < 0 || w.Size > 8:
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s.size %d: a watchpoint watches 1 to 8 bytes", field, w.Size)
		}
		switch w.Access {
		case "", "write", "read", "readWrite":
		default:
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s.access %q: want write, read or readWrite", field, w.Access)
		}
	}
	return nil
}

// SetWatchpoints replaces the session's watchpoints with req's (an empty
// list clears them). Setting some needs the session stopped: expressions
// are resolved in the frame a snapshot shows (stopFrame).
func (s *Session) SetWatchpoints(ctx context.Context, req WatchpointsRequest) (*WatchpointsResult, error) {
	c, err := s.live()
	if err != nil {
		return nil, err
	}
	if !s.supports("supportsDataBreakpoints") {
		return nil, protocol.Errorf(protocol.CodeUnsupported, "the %s adapter does not support watchpoints (data breakpoints); %s does", s.adapter.Name(), watchpointAdapters)
	}
	if err := validWatchpoints(req.Watchpoints); err != nil {
		return nil, err
	}
	res := &WatchpointsResult{Watchpoints: []WatchpointResult{}}
	list := make([]map[string]any, 0, len(req.Watchpoints))
	if len(req.Watchpoints) > 0 {
		state, stop, _, _ := s.snapshotState()
		if state != StateStopped || stop == nil {
			return nil, protocol.Errorf(protocol.CodeSessionRunning, "session %s is %s; set-watchpoints needs it stopped (at a breakpoint, or pause it) to resolve the watched expressions", s.id, state)
		}
		frame, ok, err := s.stopFrame(ctx, c, stop)
		if err != nil || !ok {
			return nil, fmt.Errorf("reading the stopped frame: %v", err)
		}
		namer, _ := s.adapter.(watchNamer)
		for i, w := range req.Watchpoints {
			access := w.Access
			if access == "" {
				access = "write"
			}
			name, field := w.Expression, fmt.Sprintf("watchpoints[%d].expression", i)
			if w.Address != "" {
				name, field = w.Address, fmt.Sprintf("watchpoints[%d].address", i)
			}
			if namer != nil && w.Address != "" {
				name = namer.watchAddress(w.Address, max(w.Size, 4))
			} else if namer != nil {
				name = namer.watchName(w.Expression)
			}
			var info struct {
				DataID      *string  `json:"dataId"`
				Description string   `json:"description"`
				AccessTypes []string `json:"accessTypes"`
			}
			if err := c.Do(ctx, "dataBreakpointInfo", map[string]any{"name": name, "frameId": frame.ID}, &info); err != nil {
				return nil, protocol.Errorf(protocol.CodeInvalidPayload, "%s %q cannot be watched: %v", field, name, s.adapterError(err))
			}
			if info.DataID == nil || *info.DataID == "" {
				return nil, protocol.Errorf(protocol.CodeInvalidPayload, "%s %q has no address to watch: %s", field, w.Expression+w.Address, info.Description)
			}
			bp := map[string]any{"dataId": *info.DataID, "accessType": access}
			if w.Condition != "" {
				bp["condition"] = w.Condition
			}
			if w.HitCondition != "" {
				bp["hitCondition"] = w.HitCondition
			}
			list = append(list, bp)
			res.Watchpoints = append(res.Watchpoints, WatchpointResult{Expression: w.Expression, Address: w.Address, Access: access, Description: info.Description})
		}
	}
	var body struct {
		Breakpoints []dapBreakpoint `json:"breakpoints"`
	}
	if err := c.Do(ctx, "setDataBreakpoints", map[string]any{"breakpoints": list}, &body); err != nil {
		return nil, s.adapterError(err)
	}
	for i, b := range body.Breakpoints {
		if i < len(res.Watchpoints) {
			res.Watchpoints[i].ID, res.Watchpoints[i].Verified, res.Watchpoints[i].Message = b.ID, b.Verified, b.Message
		}
	}
	return res, nil
}
