//go:build !windows

package bridge

import (
	"context"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// mountDebugRestartWatch mounts restart and set-watchpoints beside the
// other debug routes (routes_debug.go), on the same lazy Manager.
func mountDebugRestartWatch(r *Router, h *lazy[*dap.Manager]) {
	Handle(r, protocol.DebugRestartEndpoint, func(ctx context.Context, c *Call, req dap.RestartRequest) (*dap.RestartResult, error) {
		if _, err := debugSession(ctx, h, c, req.SessionID); err != nil {
			return nil, err
		}
		m, err := h.get(ctx)
		if err != nil {
			return nil, err
		}
		return m.Restart(ctx, req)
	})
	Handle(r, protocol.DebugWatchpointsEndpoint, func(ctx context.Context, c *Call, req dap.WatchpointsRequest) (*dap.WatchpointsResult, error) {
		s, err := debugSession(ctx, h, c, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.SetWatchpoints(ctx, req)
	})
}
