package bridge

import (
	"context"

	"github.com/tetherdev/tether/dap"
)

// Debug endpoints (docs/design.md, "Bridge routes"). Every /api/debug route
// but list-sessions takes session_id in its payload.
const (
	DebugContextEndpoint     = "/api/workspace/debug-context"
	DebugStartEndpoint       = "/api/debug/start-session"
	DebugBreakpointsEndpoint = "/api/debug/set-breakpoints"
	DebugContinueEndpoint    = "/api/debug/continue"
	DebugStepOverEndpoint    = "/api/debug/step-over"
	DebugStepIntoEndpoint    = "/api/debug/step-into"
	DebugStepOutEndpoint     = "/api/debug/step-out"
	DebugPauseEndpoint       = "/api/debug/pause"
	DebugSnapshotEndpoint    = "/api/debug/snapshot"
	DebugEvaluateEndpoint    = "/api/debug/evaluate"
	DebugListEndpoint        = "/api/debug/list-sessions"
	DebugStopEndpoint        = "/api/debug/stop-session"
	DebugOutputEndpoint      = "/api/debug/output"
)

func mountDebug(r *Router, b *Bridge) {
	cfg := dap.Config{Root: b.root, Logger: b.log}
	// Made on first use, so a bridge that never debugs probes nothing;
	// closing it ends every debug session and its processes.
	h := newLazy(func() (*dap.Manager, error) { return dap.NewManager(cfg) }, (*dap.Manager).Close, dap.ErrClosed)
	b.debug = h

	handleLazy(r, h, DebugContextEndpoint, func(ctx context.Context, m *dap.Manager, _ *Call, req dap.ContextRequest) (*dap.DebugContext, error) {
		return m.DebugContext(ctx, req), nil
	})
	handleLazy(r, h, DebugStartEndpoint, func(ctx context.Context, m *dap.Manager, _ *Call, req dap.StartRequest) (*dap.StartResult, error) {
		return m.Start(ctx, req)
	})
	Handle(r, DebugBreakpointsEndpoint, func(ctx context.Context, _ *Call, req dap.SetBreakpointsRequest) (*dap.SetBreakpointsResult, error) {
		s, err := debugSession(ctx, h, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.SetBreakpoints(ctx, req)
	})
	for path, cmd := range map[string]string{
		DebugContinueEndpoint: dap.CmdContinue,
		DebugStepOverEndpoint: dap.CmdStepOver,
		DebugStepIntoEndpoint: dap.CmdStepInto,
		DebugStepOutEndpoint:  dap.CmdStepOut,
		DebugPauseEndpoint:    dap.CmdPause,
	} {
		Handle(r, path, func(ctx context.Context, _ *Call, req dap.ControlRequest) (*dap.ControlResult, error) {
			s, err := debugSession(ctx, h, req.SessionID)
			if err != nil {
				return nil, err
			}
			return s.Control(ctx, cmd, req)
		})
	}
	Handle(r, DebugSnapshotEndpoint, func(ctx context.Context, _ *Call, req dap.SnapshotRequest) (*dap.Snapshot, error) {
		s, err := debugSession(ctx, h, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Snapshot(ctx, req)
	})
	Handle(r, DebugEvaluateEndpoint, func(ctx context.Context, _ *Call, req dap.EvaluateRequest) (*dap.EvalResult, error) {
		s, err := debugSession(ctx, h, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Evaluate(ctx, req)
	})
	handleLazy(r, h, DebugListEndpoint, func(_ context.Context, m *dap.Manager, _ *Call, _ struct{}) (*dap.SessionList, error) {
		return m.List(), nil
	})
	handleLazy(r, h, DebugStopEndpoint, func(ctx context.Context, m *dap.Manager, _ *Call, req dap.StopRequest) (*dap.StopResult, error) {
		return m.Stop(ctx, req)
	})
	Handle(r, DebugOutputEndpoint, func(ctx context.Context, _ *Call, req dap.OutputRequest) (*dap.OutputResult, error) {
		s, err := debugSession(ctx, h, req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Output(req.Offset), nil
	})
}

// debugSession returns the session id names, opening the Manager if this
// is the first debug call.
func debugSession(ctx context.Context, h *lazy[*dap.Manager], id string) (*dap.Session, error) {
	m, err := h.get(ctx)
	if err != nil {
		return nil, err
	}
	return m.Session(id)
}
