//go:build !windows

package dap

import (
	"context"
	"fmt"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Execution control of a session: continue, steps and pause, each
// optionally waiting for the stop it causes.

// Control commands accepted by Session.Control.
const (
	CmdContinue = "continue"
	CmdStepOver = "next"
	CmdStepInto = "stepIn"
	CmdStepOut  = "stepOut"
	CmdPause    = "pause"
)

// Control sends an execution-control command. With wait it returns when the
// session stops again or ends, or after the wait timeout (default 10 s) with
// state running.
func (s *Session) Control(ctx context.Context, cmd string, req ControlRequest) (*ControlResult, error) {
	c, err := s.live()
	if err != nil {
		return nil, err
	}
	if err := s.refusePostMortem(cmd); err != nil {
		return nil, err
	}
	wait := cmd != CmdContinue
	if req.Wait != nil {
		wait = *req.Wait
	}
	s.mu.Lock()
	state, stop, before := s.state, s.stop, s.stops
	switch {
	case cmd == CmdPause && state == StateStopped:
		s.mu.Unlock()
		return s.controlResult(ctx, c, true)
	case cmd != CmdPause && state != StateStopped:
		s.mu.Unlock()
		if cmd == CmdContinue && state == StateRunning {
			return &ControlResult{SessionID: s.id, State: state}, nil
		}
		return nil, protocol.Errorf(protocol.CodeSessionRunning, "session %s is %s; %s needs it stopped", s.id, state, cmd)
	}
	thread := req.ThreadID
	if thread == 0 && stop != nil {
		thread = stop.ThreadID
	}
	if cmd != CmdPause {
		// Before sending: the next stop event may beat the response.
		s.state = StateRunning
		s.notifyLocked()
	} else {
		s.pausing = true
	}
	s.mu.Unlock()
	if thread == 0 {
		if thread, err = s.firstThread(ctx, c); err != nil {
			return nil, err
		}
	}
	if err := c.Do(ctx, cmd, map[string]any{"threadId": thread}, nil); err != nil {
		s.mu.Lock()
		if s.state == StateRunning && s.stops == before && cmd != CmdPause {
			s.state = StateStopped
			s.notifyLocked()
		}
		s.mu.Unlock()
		return nil, s.adapterError(err)
	}
	if !wait {
		st, _, _, _ := s.snapshotState()
		return &ControlResult{SessionID: s.id, State: st}, nil
	}
	timeout := 10 * time.Second
	if req.WaitTimeoutMS > 0 {
		timeout = time.Duration(req.WaitTimeoutMS) * time.Millisecond
	}
	if pc, ok := s.adapter.(pauseConfirmer); ok && cmd == CmdPause {
		if err := pc.confirmPause(ctx, s, c, thread, before, timeout); err != nil {
			return nil, err
		}
	}
	if _, err := s.waitStop(ctx, before, boundBy(ctx, timeout)); err != nil {
		return nil, err
	}
	return s.controlResult(ctx, c, true)
}

// boundBy shortens d so that a wait ends a little before ctx's deadline and
// the caller still gets a real answer.
func boundBy(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - 250*time.Millisecond; left < d {
			d = max(left, 0)
		}
	}
	return d
}

func (s *Session) controlResult(ctx context.Context, c *Client, withLocation bool) (*ControlResult, error) {
	s.mu.Lock()
	res := &ControlResult{SessionID: s.id, State: s.state, Stop: s.stopIfStoppedLocked(), ExitCode: s.exitCode}
	s.mu.Unlock()
	res.Stop = s.withException(ctx, c, res.Stop)
	if withLocation && res.Stop != nil {
		frames, err := s.frames(ctx, c, res.Stop.ThreadID, 1)
		if err == nil && len(frames) > 0 {
			res.Location = &frames[0]
		}
	}
	return res, nil
}

func (s *Session) firstThread(ctx context.Context, c *Client) (int, error) {
	var body struct {
		Threads []struct {
			ID int `json:"id"`
		} `json:"threads"`
	}
	if err := c.Do(ctx, "threads", nil, &body); err != nil {
		return 0, s.adapterError(err)
	}
	if len(body.Threads) == 0 {
		return 0, fmt.Errorf("the debuggee has no threads")
	}
	return body.Threads[0].ID, nil
}
