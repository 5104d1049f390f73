package dap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Grace periods of Stop: the disconnect request, then the adapter's exit.
const (
	disconnectTimeout = 3 * time.Second
	exitGrace         = 2 * time.Second
)

// Session is one debuggee driven through one adapter process. Its state
// changes on the client's read goroutine (events) and on requests; every
// method is safe for concurrent use.
type Session struct {
	id        string
	adapter   Adapter
	name      string
	request   string // launch or attach
	root      string
	started   time.Time
	proc      *adapterProc
	caps      json.RawMessage
	out       *outputBuffer
	entryStop bool // stopOnEntry was asked: the first stop is "entry"

	initialized     chan struct{}
	initializedOnce sync.Once
	watcherDone     chan struct{}
	stopOnce        sync.Once

	mu          sync.Mutex
	state       string
	stop        *StopInfo
	stops       int           // stopped events so far
	changed     chan struct{} // closed and replaced on every change
	exitCode    *int
	endReason   string
	debuggeePid int
	stopping    bool                    // Stop was called: the adapter's exit is expected
	pausing     bool                    // a pause was sent and no stop came yet
	files       map[string][]Breakpoint // per-file results, by absolute path
	funcs       []Breakpoint
}

func newSession(id string, a Adapter, root string) *Session {
	return &Session{
		id:          id,
		adapter:     a,
		root:        root,
		started:     time.Now(),
		out:         newOutputBuffer(4 << 20),
		initialized: make(chan struct{}),
		watcherDone: make(chan struct{}),
		state:       StateInitializing,
		changed:     make(chan struct{}),
		files:       map[string][]Breakpoint{},
	}
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// notifyLocked wakes every waiter; s.mu must be held.
func (s *Session) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// onEvent runs on the client's read goroutine.
func (s *Session) onEvent(m *Message) {
	switch m.Event {
	case "initialized":
		s.initializedOnce.Do(func() { close(s.initialized) })
	case "stopped":
		var b struct {
			Reason            string `json:"reason"`
			Description       string `json:"description"`
			ThreadID          int    `json:"threadId"`
			Text              string `json:"text"`
			AllThreadsStopped bool   `json:"allThreadsStopped"`
			HitBreakpointIDs  []int  `json:"hitBreakpointIds"`
		}
		_ = json.Unmarshal(m.Body, &b)
		st := &StopInfo{Reason: b.Reason, Description: b.Description, Text: b.Text, ThreadID: b.ThreadID,
			AllThreadsStopped: b.AllThreadsStopped, HitBreakpointIDs: b.HitBreakpointIDs}
		s.mu.Lock()
		if s.stops == 0 && s.entryStop && st.Reason != "breakpoint" && st.Reason != "entry" &&
			strings.Contains(st.Description+st.Text, "SIGSTOP") {
			// lldb-dap reports stopOnEntry as exception "signal SIGSTOP".
			st.Description = "entry (" + st.Description + ")"
			st.Reason = "entry"
		} else if s.pausing && st.Reason == "exception" && strings.Contains(st.Description+st.Text, "SIGSTOP") {
			// …and a pause as exception "signal SIGSTOP" too.
			st.Description = "pause (" + st.Description + ")"
			st.Reason = "pause"
		}
		s.pausing = false
		if s.state != StateEnded {
			s.state = StateStopped
		}
		s.stop = st
		s.stops++
		s.notifyLocked()
		s.mu.Unlock()
	case "continued":
		s.mu.Lock()
		if s.state != StateEnded {
			s.state = StateRunning
			s.notifyLocked()
		}
		s.mu.Unlock()
	case "exited":
		var b struct {
			ExitCode int `json:"exitCode"`
		}
		_ = json.Unmarshal(m.Body, &b)
		s.mu.Lock()
		s.exitCode = &b.ExitCode
		s.notifyLocked()
		s.mu.Unlock()
	case "terminated":
		s.end("the debuggee terminated")
	case "process":
		// The debuggee (and, for lldb-dap, an lldb-server in a session of
		// its own) exists now: remember them, in case the adapter dies.
		s.proc.remember()
		var b struct {
			Pid int `json:"systemProcessId"`
		}
		_ = json.Unmarshal(m.Body, &b)
		s.mu.Lock()
		s.debuggeePid = b.Pid
		s.mu.Unlock()
	case "output":
		var b struct {
			Category string `json:"category"`
			Output   string `json:"output"`
		}
		_ = json.Unmarshal(m.Body, &b)
		if b.Category != "telemetry" {
			s.out.write(b.Output)
		}
	case "breakpoint":
		var b struct {
			Reason     string        `json:"reason"`
			Breakpoint dapBreakpoint `json:"breakpoint"`
		}
		if json.Unmarshal(m.Body, &b) == nil && b.Breakpoint.ID != 0 {
			s.updateBreakpoint(b.Breakpoint.toBreakpoint(""))
		}
	}
	// Anything else (module, thread, loadedSource, adapters' custom events)
	// carries nothing the routes report.
}

func (s *Session) end(reason string) {
	s.mu.Lock()
	if s.state != StateEnded {
		s.state = StateEnded
		s.endReason = reason
		s.notifyLocked()
	}
	s.mu.Unlock()
}

// watch marks the session ended when the adapter's connection drops.
func (s *Session) watch() {
	defer close(s.watcherDone)
	<-s.proc.client.Done()
	s.mu.Lock()
	ended := s.state == StateEnded
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		s.end("stopped by stop-session")
		return
	}
	if !ended {
		select {
		case <-s.proc.exited:
		case <-time.After(time.Second): // stderr may lag the pipe closing
		}
		// The adapter is gone; what it started is not.
		killAll(s.proc.tree())
		tail := strings.TrimSpace(s.proc.stderr.String())
		if tail == "" {
			tail = "(no stderr)"
		}
		s.end(fmt.Sprintf("the debug adapter %s exited unexpectedly; its stderr ends with: %s", s.adapter.Name(), lastLines(tail, 20)))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// endedError is the session_ended answer for this session.
func (s *Session) endedErrorLocked() error {
	msg := fmt.Sprintf("session %s has ended: %s", s.id, s.endReason)
	if s.exitCode != nil {
		msg += fmt.Sprintf(" (exit code %d)", *s.exitCode)
	}
	return protocol.Errorf(protocol.CodeSessionEnded, "%s", msg)
}

func (s *Session) endedError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endedErrorLocked()
}

// snapshotState returns the state, the last stop, the stop count and the
// channel closed on the next change.
func (s *Session) snapshotState() (string, *StopInfo, int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.stop, s.stops, s.changed
}

// waitStop waits until a stop after the after-th, the end, or the timeout.
// It returns the state then.
func (s *Session) waitStop(ctx context.Context, after int, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		state, _, stops, changed := s.snapshotState()
		if state == StateEnded || (state == StateStopped && stops > after) {
			return state, nil
		}
		select {
		case <-changed:
		case <-t.C:
			return state, nil
		case <-ctx.Done():
			return state, ctx.Err()
		}
	}
}

// Info describes the session for list-sessions.
func (s *Session) Info() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionInfo{SessionID: s.id, Adapter: s.adapter.Name(), Name: s.name, Request: s.request,
		State: s.state, Stop: s.stopIfStoppedLocked(), ExitCode: s.exitCode, EndReason: s.endReason, StartedAt: s.started}
}

func (s *Session) stopIfStoppedLocked() *StopInfo {
	if s.state == StateStopped {
		return s.stop
	}
	return nil
}

// client returns the DAP client, or session_ended.
func (s *Session) live() (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateEnded {
		return nil, s.endedErrorLocked()
	}
	return s.proc.client, nil
}

// adapterError turns a request failure into the answer a caller sees: the
// session's end if the adapter went away meanwhile, else the error.
func (s *Session) adapterError(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return err
	}
	select {
	case <-s.proc.client.Done():
		// Let watch record the end (with stderr) before answering.
		select {
		case <-s.watcherDone:
		case <-time.After(2 * time.Second):
		}
		s.end("the debug adapter connection closed")
		return s.endedError()
	default:
	}
	return err
}

// ----- breakpoints -----

type dapBreakpoint struct {
	ID       int    `json:"id"`
	Verified bool   `json:"verified"`
	Line     int    `json:"line"`
	Message  string `json:"message"`
	Source   *struct {
		Path string `json:"path"`
	} `json:"source"`
}

func (b dapBreakpoint) toBreakpoint(path string) Breakpoint {
	if b.Source != nil && b.Source.Path != "" {
		path = b.Source.Path
	}
	return Breakpoint{ID: b.ID, Verified: b.Verified, Line: b.Line, Path: path, Message: b.Message}
}

func (s *Session) updateBreakpoint(nb Breakpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for path, list := range s.files {
		for i := range list {
			if list[i].ID == nb.ID {
				if nb.Path == "" {
					nb.Path = path
				}
				if nb.Line == 0 {
					nb.Line = list[i].Line
				}
				list[i] = nb
				return
			}
		}
	}
	for i := range s.funcs {
		if s.funcs[i].ID == nb.ID {
			nb.Function = s.funcs[i].Function
			s.funcs[i] = nb
			return
		}
	}
}

func (s *Session) setFileBreakpoints(ctx context.Context, c *Client, path string, bps []SourceBreakpoint) ([]Breakpoint, error) {
	path = absIn(s.root, path)
	list := make([]map[string]any, 0, len(bps))
	for _, b := range bps {
		if b.Line <= 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "breakpoint line must be positive, got %d", b.Line)
		}
		m := map[string]any{"line": b.Line}
		if b.Column > 0 {
			m["column"] = b.Column
		}
		if b.Condition != "" {
			m["condition"] = b.Condition
		}
		if b.HitCondition != "" {
			m["hitCondition"] = b.HitCondition
		}
		if b.LogMessage != "" {
			m["logMessage"] = b.LogMessage
		}
		list = append(list, m)
	}
	var body struct {
		Breakpoints []dapBreakpoint `json:"breakpoints"`
	}
	args := map[string]any{"source": map[string]any{"path": path}, "breakpoints": list, "sourceModified": false}
	if err := c.Do(ctx, "setBreakpoints", args, &body); err != nil {
		return nil, s.adapterError(err)
	}
	out := make([]Breakpoint, len(body.Breakpoints))
	for i, b := range body.Breakpoints {
		out[i] = b.toBreakpoint(path)
		if out[i].Line == 0 && i < len(bps) {
			out[i].Line = bps[i].Line
		}
	}
	s.mu.Lock()
	if len(out) == 0 {
		delete(s.files, path)
	} else {
		s.files[path] = out
	}
	s.mu.Unlock()
	return out, nil
}

func (s *Session) setFunctionBreakpoints(ctx context.Context, c *Client, fbs []FunctionBreakpoint) ([]Breakpoint, error) {
	list := make([]map[string]any, 0, len(fbs))
	for _, f := range fbs {
		m := map[string]any{"name": f.Name}
		if f.Condition != "" {
			m["condition"] = f.Condition
		}
		if f.HitCondition != "" {
			m["hitCondition"] = f.HitCondition
		}
		list = append(list, m)
	}
	var body struct {
		Breakpoints []dapBreakpoint `json:"breakpoints"`
	}
	if err := c.Do(ctx, "setFunctionBreakpoints", map[string]any{"breakpoints": list}, &body); err != nil {
		return nil, s.adapterError(err)
	}
	out := make([]Breakpoint, len(body.Breakpoints))
	for i, b := range body.Breakpoints {
		out[i] = b.toBreakpoint("")
		if i < len(fbs) {
			out[i].Function = fbs[i].Name
		}
	}
	s.mu.Lock()
	s.funcs = out
	s.mu.Unlock()
	return out, nil
}

func (s *Session) setExceptionFilters(ctx context.Context, c *Client, filters []string) error {
	if filters == nil {
		filters = []string{}
	}
	if err := c.Do(ctx, "setExceptionBreakpoints", map[string]any{"filters": filters}, nil); err != nil {
		return s.adapterError(err)
	}
	return nil
}

// SetBreakpoints replaces a file's breakpoints (and, when given, the
// function breakpoints and exception filters). It works before the program
// runs, while it is stopped and while it runs.
func (s *Session) SetBreakpoints(ctx context.Context, req SetBreakpointsRequest) (*SetBreakpointsResult, error) {
	c, err := s.live()
	if err != nil {
		return nil, err
	}
	if req.Path == "" && req.Functions == nil && req.ExceptionFilters == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "give path with breakpoints, function_breakpoints or exception_filters")
	}
	res := &SetBreakpointsResult{Breakpoints: []Breakpoint{}}
	if req.Path != "" {
		if res.Breakpoints, err = s.setFileBreakpoints(ctx, c, req.Path, req.Breakpoints); err != nil {
			return nil, err
		}
	}
	if req.Functions != nil {
		if res.FunctionBreakpoints, err = s.setFunctionBreakpoints(ctx, c, req.Functions); err != nil {
			return nil, err
		}
	}
	if req.ExceptionFilters != nil {
		if err := s.setExceptionFilters(ctx, c, req.ExceptionFilters); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ----- execution control -----

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
	if cmd == CmdPause {
		// lldb-dap 19 answers pause but may send no stopped event; a thread
		// that yields a stack trace is stopped, whatever the events said.
		st, err := s.waitStop(ctx, before, boundBy(ctx, min(timeout, pauseEventWait)))
		for retry := 0; err == nil && st == StateRunning && retry < 3; retry++ {
			// A pause right after a continue can be lost in lldb-dap 19
			// (answered, never stopped); asking again stops it.
			if err = c.Do(ctx, cmd, map[string]any{"threadId": thread}, nil); err != nil {
				return nil, s.adapterError(err)
			}
			st, err = s.waitStop(ctx, before, boundBy(ctx, min(timeout, pauseEventWait)))
		}
		if err != nil {
			return nil, err
		}
		if st == StateRunning {
			if frames, err := s.frames(ctx, c, thread, 1); err == nil && len(frames) > 0 {
				s.mu.Lock()
				if s.state == StateRunning && s.stops == before {
					s.state = StateStopped
					s.stop = &StopInfo{Reason: "pause", Description: "paused (the adapter sent no stopped event)", ThreadID: thread, AllThreadsStopped: true}
					s.stops++
					s.notifyLocked()
				}
				s.mu.Unlock()
			}
		}
	}
	if _, err := s.waitStop(ctx, before, boundBy(ctx, timeout)); err != nil {
		return nil, err
	}
	return s.controlResult(ctx, c, true)
}

// pauseEventWait is how long pause waits for a stopped event before asking
// the adapter directly.
const pauseEventWait = 500 * time.Millisecond

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

// ----- output, stop -----

// Output returns the captured output from offset.
func (s *Session) Output(offset int64) *OutputResult {
	text, from, next := s.out.read(offset)
	st, _, _, _ := s.snapshotState()
	return &OutputResult{SessionID: s.id, Output: text, Offset: from, NextOffset: next, State: st}
}

// Stop disconnects (terminating or detaching the debuggee), then ends the
// adapter's process group after a grace. It is safe to call more than once.
func (s *Session) Stop(ctx context.Context, terminate *bool) *StopResult {
	term := s.request != "attach"
	if terminate != nil {
		term = *terminate
	}
	s.mu.Lock()
	ended := s.state == StateEnded
	pid := s.debuggeePid
	s.stopping = true
	s.mu.Unlock()
	s.stopOnce.Do(func() {
		if !ended {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), disconnectTimeout)
			_ = s.proc.client.Do(dctx, "disconnect", map[string]any{"restart": false, "terminateDebuggee": term}, nil)
			cancel()
		}
		s.proc.stop(exitGrace)
		if term && pid > 0 && s.request != "attach" {
			// The debuggee may sit outside the adapter's group; it must not
			// outlive the session.
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	<-s.watcherDone
	s.end("stopped by stop-session")
	s.mu.Lock()
	defer s.mu.Unlock()
	return &StopResult{SessionID: s.id, State: s.state, ExitCode: s.exitCode}
}
