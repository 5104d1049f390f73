//go:build !windows

package bridge

import (
	"context"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

func mountDebug(r *Router, b *Bridge) {
	cfg := dap.Config{Root: b.root, Logger: b.log, AttachAllow: b.cfg.DebugAttachAllow,
		WarmAdapters: b.cfg.DebugWarmAdapters, WarmIdle: b.cfg.DebugWarmIdle}
	// Made on first use, so a bridge that never debugs probes nothing;
	// closing it ends every debug session and its processes.
	h := newLazy(func() (*dap.Manager, error) { return dap.NewManager(cfg) }, (*dap.Manager).Close, dap.ErrClosed)
	b.debug = h
	mountDebugRestartWatch(r, h)

	handleLazy(r, h, protocol.DebugContextEndpoint, func(ctx context.Context, m *dap.Manager, _ *Call, req dap.ContextRequest) (*dap.DebugContext, error) {
		return m.DebugContext(ctx, req), nil
	})
	handleLazy(r, h, protocol.DebugStartEndpoint, func(ctx context.Context, m *dap.Manager, c *Call, req dap.StartRequest) (*dap.StartResult, error) {
		res, err := m.Start(ctx, req)
		if res != nil {
			c.Audit(audit.WithAdapter(res.Adapter))
		}
		return res, err
	})
	Handle(r, protocol.DebugBreakpointsEndpoint, func(ctx context.Context, c *Call, req dap.SetBreakpointsRequest) (*dap.SetBreakpointsResult, error) {
		s, err := debugSession(ctx, h, c, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.SetBreakpoints(ctx, req)
	})
	for path, cmd := range map[string]string{
		protocol.DebugContinueEndpoint: dap.CmdContinue,
		protocol.DebugStepOverEndpoint: dap.CmdStepOver,
		protocol.DebugStepIntoEndpoint: dap.CmdStepInto,
		protocol.DebugStepOutEndpoint:  dap.CmdStepOut,
		protocol.DebugPauseEndpoint:    dap.CmdPause,
	} {
		Handle(r, path, func(ctx context.Context, c *Call, req dap.ControlRequest) (*dap.ControlResult, error) {
			s, err := debugSession(ctx, h, c, req.SessionID)
			if err != nil {
				return nil, err
			}
			return s.Control(ctx, cmd, req)
		})
	}
	Handle(r, protocol.DebugSnapshotEndpoint, func(ctx context.Context, c *Call, req dap.SnapshotRequest) (*dap.Snapshot, error) {
		s, err := debugSession(ctx, h, c, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Snapshot(ctx, req)
	})
	Handle(r, protocol.DebugEvaluateEndpoint, func(ctx context.Context, c *Call, req dap.EvaluateRequest) (*dap.EvalResult, error) {
		s, err := debugSession(ctx, h, c, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Evaluate(ctx, req)
	})
	handleLazy(r, h, protocol.DebugListEndpoint, func(_ context.Context, m *dap.Manager, _ *Call, _ struct{}) (*dap.SessionList, error) {
		return m.List(), nil
	})
	handleLazy(r, h, protocol.DebugStopEndpoint, func(ctx context.Context, m *dap.Manager, _ *Call, req dap.StopRequest) (*dap.StopResult, error) {
		return m.Stop(ctx, req)
	})
	Handle(r, protocol.DebugOutputEndpoint, func(ctx context.Context, c *Call, req dap.OutputRequest) (*dap.OutputResult, error) {
		s, err := debugSession(ctx, h, c, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Output(req.Offset), nil
	})
}

// debugSession returns the session id names, opening the Manager if this
// is the first debug call; c's audit line names the session's adapter.
func debugSession(ctx context.Context, h *lazy[*dap.Manager], c *Call, id string) (*dap.Session, error) {
	m, err := h.get(ctx)
	if err != nil {
		return nil, err
	}
	s, err := m.Session(id)
	if err == nil {
		c.Audit(audit.WithAdapter(s.Adapter()))
	}
	return s, err
}
