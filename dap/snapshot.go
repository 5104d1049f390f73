//go:build !windows

package dap

import (
	"context"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Bounds of a snapshot, so one call never floods the caller.
const (
	defaultSnapshotWait = 5 * time.Second
	defaultMaxFrames    = 20
	defaultVarDepth     = 1
	maxVarDepth         = 5
	maxVarsPerLevel     = 100
)

// Snapshot waits (bounded) for the session to stop, then returns where and
// why it stopped, the stack, the scopes of the stop's frame (focus: the
// top one, or the workspace's own below a runtime's or library's) with
// their variables expanded to the requested depth, and the expressions
// evaluated there. A session
// still running after the wait answers session_running; an ended one
// session_ended with its exit code.
func (s *Session) Snapshot(ctx context.Context, req SnapshotRequest) (*Snapshot, error) {
	if _, err := s.live(); err != nil {
		return nil, err
	}
	wait := defaultSnapshotWait
	if req.WaitTimeoutMS > 0 {
		wait = time.Duration(req.WaitTimeoutMS) * time.Millisecond
	}
	state, _, stops, _ := s.snapshotState()
	if state != StateStopped {
		var err error
		// A stop counts only if it comes after now: the session is running.
		if state, err = s.waitStop(ctx, stops, boundBy(ctx, wait)); err != nil {
			return nil, err
		}
	}
	switch state {
	case StateEnded:
		return nil, s.endedError()
	case StateStopped:
	default:
		return nil, protocol.Errorf(protocol.CodeSessionRunning, "session %s is still %s after waiting %s for it to stop", s.id, state, wait)
	}
	c, err := s.live() // a child session may have started meanwhile
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	stop := s.stop
	s.mu.Unlock()
	stop = s.withException(ctx, c, stop)

	snap := &Snapshot{SessionID: s.id, State: StateStopped, Stop: stop, Frames: []Frame{}, Scopes: []Scope{}, Locals: []Variable{}}
	thread := req.ThreadID
	if thread == 0 && stop != nil {
		thread = stop.ThreadID
	}
	if thread == 0 {
		if thread, err = s.firstThread(ctx, c); err != nil {
			return nil, err
		}
	}
	snap.ThreadID = thread
	maxFrames := req.MaxFrames
	if maxFrames <= 0 {
		maxFrames = defaultMaxFrames
	}
	if snap.Frames, err = s.frames(ctx, c, thread, maxFrames); err != nil {
		return nil, err
	}
	depth := req.VariableDepth
	if depth <= 0 {
		depth = defaultVarDepth
	}
	depth = min(depth, maxVarDepth)
	snap.FrameIndex = s.focus(snap.Frames, stop)
	if req.FrameIndex != nil {
		if *req.FrameIndex < 0 || (*req.FrameIndex > 0 && *req.FrameIndex >= len(snap.Frames)) {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "frame_index %d is not a frame of the %d fetched (0 is the top; max_frames fetches more)", *req.FrameIndex, len(snap.Frames))
		}
		snap.FrameIndex = *req.FrameIndex
	}
	frameID := 0
	if len(snap.Frames) > 0 {
		frameID = snap.Frames[snap.FrameIndex].ID
		var body struct {
			Scopes []struct {
				Name               string `json:"name"`
				PresentationHint   string `json:"presentationHint"`
				VariablesReference int    `json:"variablesReference"`
				Expensive          bool   `json:"expensive"`
			} `json:"scopes"`
		}
		if err := c.Do(ctx, "scopes", map[string]any{"frameId": frameID}, &body); err != nil {
			return nil, s.adapterError(err)
		}
		for i, sc := range body.Scopes {
			scope := Scope{Name: sc.Name, Expensive: sc.Expensive}
			isLocals := sc.PresentationHint == "locals" || sc.Name == "Locals" || sc.Name == "Local" || (i == 0 && len(body.Scopes) > 0)
			// Globals and registers are large and rarely wanted: expand only
			// cheap scopes, and locals always.
			if sc.VariablesReference > 0 && (isLocals || !sc.Expensive) && !isRegisters(sc.Name) {
				vars, err := s.variables(ctx, c, sc.VariablesReference, depth)
				if err != nil {
					return nil, err
				}
				scope.Variables = vars
			}
			if isLocals && len(snap.Locals) == 0 && scope.Variables != nil {
				snap.Locals = scope.Variables
			}
			snap.Scopes = append(snap.Scopes, scope)
		}
	}
	for _, e := range req.Expressions {
		snap.Expressions = append(snap.Expressions, s.evaluate(ctx, c, e, frameID, "watch"))
	}
	return snap, nil
}

func isRegisters(name string) bool {
	return name == "Registers" || name == "Globals" || name == "Global"
}

func (s *Session) frames(ctx context.Context, c *Client, thread, levels int) ([]Frame, error) {
	var body struct {
		StackFrames []struct {
			ID     int    `json:"id"`
			Name   string `json:"name"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
			Source *struct {
				Name string `json:"name"`
				Path string `json:"path"`
			} `json:"source"`
		} `json:"stackFrames"`
	}
	if err := c.Do(ctx, "stackTrace", map[string]any{"threadId": thread, "startFrame": 0, "levels": levels}, &body); err != nil {
		return nil, s.adapterError(err)
	}
	out := make([]Frame, 0, len(body.StackFrames))
	for _, f := range body.StackFrames {
		fr := Frame{ID: f.ID, Name: f.Name, Line: f.Line, Column: f.Column}
		if f.Source != nil {
			fr.Path, fr.Source = s.paths.local(f.Source.Path), f.Source.Name
		}
		out = append(out, fr)
	}
	return out, nil
}

func (s *Session) variables(ctx context.Context, c *Client, ref, depth int) ([]Variable, error) {
	var body struct {
		Variables []struct {
			Name               string `json:"name"`
			Value              string `json:"value"`
			Type               string `json:"type"`
			VariablesReference int    `json:"variablesReference"`
		} `json:"variables"`
	}
	if err := c.Do(ctx, "variables", map[string]any{"variablesReference": ref}, &body); err != nil {
		return nil, s.adapterError(err)
	}
	out := make([]Variable, 0, len(body.Variables))
	for i, v := range body.Variables {
		if i == maxVarsPerLevel {
			break
		}
		nv := Variable{Name: v.Name, Value: v.Value, Type: v.Type, Ref: v.VariablesReference}
		if depth > 1 && v.VariablesReference > 0 {
			children, err := s.variables(ctx, c, v.VariablesReference, depth-1)
			if err != nil {
				return nil, err
			}
			nv.Children = children
		}
		out = append(out, nv)
	}
	return out, nil
}

func (s *Session) evaluate(ctx context.Context, c *Client, expr string, frame int, evalCtx string) EvalResult {
	args := map[string]any{"expression": expr, "context": evalCtx}
	if frame != 0 {
		args["frameId"] = frame
	}
	var body struct {
		Result             string `json:"result"`
		Type               string `json:"type"`
		VariablesReference int    `json:"variablesReference"`
	}
	if err := c.Do(ctx, "evaluate", args, &body); err != nil {
		return EvalResult{Expression: expr, Error: err.Error()}
	}
	return EvalResult{Expression: expr, Result: body.Result, Type: body.Type, Ref: body.VariablesReference}
}

// Evaluate evaluates an expression in a frame (default: the top frame of
// the stopped thread). A failed evaluation is reported in Error, not as a
// failed call; an ended session answers session_ended.
func (s *Session) Evaluate(ctx context.Context, req EvaluateRequest) (*EvalResult, error) {
	c, err := s.live()
	if err != nil {
		return nil, err
	}
	if req.Expression == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "expression is empty")
	}
	frame := req.FrameID
	state, stop, _, _ := s.snapshotState()
	if frame == 0 && state == StateStopped && stop != nil {
		f, ok, err := s.stopFrame(ctx, c, stop)
		if err != nil {
			return nil, err
		}
		if ok {
			frame = f.ID
		}
	}
	evalCtx := req.Context
	if evalCtx == "" {
		evalCtx = "watch"
	}
	r := s.evaluate(ctx, c, req.Expression, frame, evalCtx)
	if r.Error != "" {
		if _, err := s.live(); err != nil {
			return nil, err
		}
	}
	return &r, nil
}
