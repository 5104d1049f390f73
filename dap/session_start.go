//go:build !windows

package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/protocol"
)

// How long start-session waits for the first stop of a stopOnEntry launch,
// so that its answer already says "stopped".
const entryWait = 5 * time.Second

// handshake starts the adapter from spec and runs the start sequence that
// works with every adapter: initialize, launch (or attach) without waiting,
// initialized, breakpoints, exception filters, configurationDone, then the
// launch response whenever it comes. environ is the adapter's environment.
// It returns once the program runs (or has stopped on entry); on failure
// the caller stops the session, ending whatever was started.
func (s *Session) handshake(ctx context.Context, spec Command, cfg map[string]any, req *StartRequest, environ []string) (*StartResult, error) {
	a := s.adapter
	dir, _ := cfg["cwd"].(string)
	if dir == "" {
		dir = s.root
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = s.root
	}
	if w, ok := a.(workDirer); ok {
		if wd := w.workDir(cfg); wd != "" {
			dir = wd
		}
	}
	if cs, ok := a.(childSessions); ok && cs.childSessions(spec) {
		s.childSessions = true
	}
	// Requests the session makes outside any call hang under this call's
	// span (trace.go); set before the adapter can ask for anything.
	s.startSpan = trace.SpanContextFromContext(ctx)
	if pb, ok := a.(prebuilder); ok && s.warm != nil {
		cfg = s.warm.builds.prebuild(ctx, s.warm.env, pb, cfg, dir)
	}
	h := handlers{event: s.onEvent, request: s.onRequest, adapter: a.Name()}
	var rawCaps json.RawMessage
	w, refill := s.warm.take(a, spec, dir, environ, s.childSessions, cfg)
	if refill != nil {
		s.refill = sync.OnceFunc(refill)
	}
	if w != nil {
		s.proc, rawCaps, s.warmUsed = w.proc, w.caps, true
		go s.watch()
		w.relay.attach(h) // after s.proc: a kept event may need it
	} else {
		proc, err := startAdapter(ctx, spec, dir, environ, h)
		if err != nil && spec.Dial != "" {
			return nil, attachRefused(a.Name(), spec.Dial, err)
		}
		if err != nil {
			return nil, protocol.Errorf(protocol.CodeDebugAdapterUnavailable, "%s: %v; %s", a.Name(), err, a.InstallHint())
		}
		s.proc = proc
		go s.watch()
		if err := proc.client.Do(ctx, "initialize", initializeArgs(a, s.childSessions), &rawCaps); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, protocol.Errorf(protocol.CodeDebugAdapterUnavailable, "%s", s.withReason(fmt.Sprintf("%s did not answer initialize: %v", a.Name(), err)))
		}
	}
	c := s.proc.client

	var caps struct {
		Filters []struct {
			Filter  string `json:"filter"`
			Default bool   `json:"default"`
		} `json:"exceptionBreakpointFilters"`
		SupportsConfigurationDone bool `json:"supportsConfigurationDoneRequest"`
		SupportsFunctionBps       bool `json:"supportsFunctionBreakpoints"`
	}
	_ = json.Unmarshal(rawCaps, &caps)
	s.caps = rawCaps
	if len(s.caps) == 0 {
		s.caps = json.RawMessage("{}")
	}
	command, _ := cfg["request"].(string)
	launchCh, err := c.Send(ctx, command, cfg)
	if err != nil {
		return nil, s.adapterError(err)
	}
	var launchResp *Message
	select {
	case <-s.initialized:
	case launchResp = <-launchCh:
		// Some adapters answer launch before initialized; a failure here
		// means there will be no initialized at all.
		if launchResp == nil {
			return nil, s.endedOrErr(fmt.Errorf("%s: %w", command, c.Err()))
		}
		if !launchResp.Success {
			return nil, s.launchFailed(command, launchResp)
		}
		select {
		case <-s.initialized:
		case <-c.Done():
			return nil, s.endedOrErr(c.Err())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case <-c.Done():
		return nil, s.endedOrErr(c.Err())
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	res := &StartResult{SessionID: s.id, Adapter: a.Name(), Capabilities: s.caps}
	for _, fb := range req.Breakpoints {
		bps, err := s.setFileBreakpoints(ctx, c, fb.Path, fb.Breakpoints)
		if err != nil {
			return nil, err
		}
		res.Breakpoints = append(res.Breakpoints, bps...)
	}
	if len(req.FunctionBreakpoints) > 0 {
		bps, err := s.setFunctionBreakpoints(ctx, c, req.FunctionBreakpoints)
		if err != nil {
			return nil, err
		}
		res.Breakpoints = append(res.Breakpoints, bps...)
	}
	if err := checkFilters("exception_filters", req.ExceptionFilters, s.exceptionFilters()); err != nil {
		return nil, err
	}
	filters := req.ExceptionFilters
	if filters == nil {
		for _, f := range caps.Filters {
			if f.Default {
				filters = append(filters, f.Filter)
			}
		}
	}
	if len(caps.Filters) > 0 {
		if err := s.setExceptionFilters(ctx, c, filters); err != nil {
			return nil, err
		}
	}
	if caps.SupportsConfigurationDone {
		if err := c.Do(ctx, "configurationDone", nil, nil); err != nil {
			return nil, s.adapterError(err)
		}
	}
	if launchResp == nil {
		select {
		case launchResp = <-launchCh:
			if launchResp == nil {
				return nil, s.endedOrErr(c.Err())
			}
			if !launchResp.Success {
				return nil, s.launchFailed(command, launchResp)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	if s.state == StateInitializing {
		s.state = StateRunning
		s.notifyLocked()
	}
	s.mu.Unlock()
	if s.entryStop {
		_, _ = s.waitStop(ctx, 0, boundBy(ctx, entryWait))
	}
	s.mu.Lock()
	res.State = s.state
	res.Stop = s.stopIfStoppedLocked()
	s.mu.Unlock()
	if lc, err := s.live(); err == nil {
		res.Stop = s.withException(ctx, lc, res.Stop)
	}
	return res, nil
}

// launchFailed is the answer to a failed launch or attach: session_ended
// when the debuggee ended meanwhile (it crashed at start), else
// invalid_payload with the adapter's message.
func (s *Session) launchFailed(command string, m *Message) error {
	re := &ResponseError{Command: command, Message: m.Message, Body: m.Body, Seq: m.RequestSeq}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateEnded {
		return protocol.Errorf(protocol.CodeSessionEnded, "%s", s.withReason(fmt.Sprintf("%s; %v", s.endedMessageLocked(), re)))
	}
	return protocol.Errorf(protocol.CodeInvalidPayload, "%s", s.withReason(re.Error()))
}

// endedOrErr is the answer when the adapter's connection ended during the
// start: the session's end, with what the adapter printed.
func (s *Session) endedOrErr(err error) error {
	e := s.adapterError(err)
	if e == nil {
		e = err
	}
	var pe *protocol.Error
	if errors.As(e, &pe) {
		return &protocol.Error{Code: pe.Code, Message: s.withReason(pe.Message)}
	}
	return e
}
