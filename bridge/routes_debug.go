package bridge

import (
	"context"
	"sync"

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
	h := &debugHost{cfg: dap.Config{Root: b.root, Logger: b.log}}
	b.debug = h

	Handle(r, DebugContextEndpoint, func(ctx context.Context, _ *Call, req dap.ContextRequest) (*dap.DebugContext, error) {
		m, err := h.manager()
		if err != nil {
			return nil, err
		}
		return m.DebugContext(ctx, req), nil
	})
	Handle(r, DebugStartEndpoint, func(ctx context.Context, _ *Call, req dap.StartRequest) (*dap.StartResult, error) {
		m, err := h.manager()
		if err != nil {
			return nil, err
		}
		return m.Start(ctx, req)
	})
	Handle(r, DebugBreakpointsEndpoint, func(ctx context.Context, _ *Call, req dap.SetBreakpointsRequest) (*dap.SetBreakpointsResult, error) {
		s, err := h.session(req.SessionID)
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
			s, err := h.session(req.SessionID)
			if err != nil {
				return nil, err
			}
			return s.Control(ctx, cmd, req)
		})
	}
	Handle(r, DebugSnapshotEndpoint, func(ctx context.Context, _ *Call, req dap.SnapshotRequest) (*dap.Snapshot, error) {
		s, err := h.session(req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Snapshot(ctx, req)
	})
	Handle(r, DebugEvaluateEndpoint, func(ctx context.Context, _ *Call, req dap.EvaluateRequest) (*dap.EvalResult, error) {
		s, err := h.session(req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Evaluate(ctx, req)
	})
	Handle(r, DebugListEndpoint, func(context.Context, *Call, struct{}) (*dap.SessionList, error) {
		m, err := h.manager()
		if err != nil {
			return nil, err
		}
		return m.List(), nil
	})
	Handle(r, DebugStopEndpoint, func(ctx context.Context, _ *Call, req dap.StopRequest) (*dap.StopResult, error) {
		m, err := h.manager()
		if err != nil {
			return nil, err
		}
		return m.Stop(ctx, req)
	})
	Handle(r, DebugOutputEndpoint, func(_ context.Context, _ *Call, req dap.OutputRequest) (*dap.OutputResult, error) {
		s, err := h.session(req.SessionID)
		if err != nil {
			return nil, err
		}
		return s.Output(req.Offset), nil
	})
}

// debugHost owns the bridge's one dap.Manager, made on first use (so a
// bridge that never debugs probes nothing) and closed when Run ends.
type debugHost struct {
	cfg dap.Config

	mu     sync.Mutex
	m      *dap.Manager
	closed bool
}

func (h *debugHost) manager() (*dap.Manager, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, dap.ErrClosed
	}
	if h.m == nil {
		m, err := dap.NewManager(h.cfg)
		if err != nil {
			return nil, err
		}
		h.m = m
	}
	return h.m, nil
}

func (h *debugHost) session(id string) (*dap.Session, error) {
	m, err := h.manager()
	if err != nil {
		return nil, err
	}
	return m.Session(id)
}

// close ends every debug session and its processes; later calls fail.
func (h *debugHost) close() {
	h.mu.Lock()
	m := h.m
	h.closed = true
	h.mu.Unlock()
	if m != nil {
		m.Close()
	}
}
