//go:build !windows

package dap

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Restart relaunches a launched program with the same configuration and
// breakpoints, keeping the session id: by the adapter's own restart request
// when it offers one (lldb-dap), else by ending the program and its adapter
// and starting both again (debugpy, delve, node), the breakpoints the
// session holds sent again. It answers like continue with wait: the first
// stop, or the state when the wait ends.

// launchSpec is how a session was started: what relaunch starts again.
// Every generation of a session id shares one, so that restarts of the
// same session take turns (mu).
type launchSpec struct {
	mu      sync.Mutex
	spec    Command
	cfg     map[string]any // the adapter's launch arguments, a private copy
	req     StartRequest   // breakpoints as first given; relaunch sends the current ones
	environ []string
}

func newLaunchSpec(spec Command, cfg map[string]any, req StartRequest, environ []string) *launchSpec {
	return &launchSpec{spec: spec, cfg: cloneConfig(cfg), req: req, environ: environ}
}

// cloneConfig deep-copies launch arguments (JSON values).
func cloneConfig(cfg map[string]any) map[string]any {
	raw, _ := json.Marshal(cfg)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// restartRelauncher is an adapter that claims supportsRestartRequest but
// whose restart does not run the program on as DAP says: restart
// relaunches it instead.
type restartRelauncher interface{ relaunchOnRestart() }

// restartWait is how long a restart waits for the first stop by default.
const restartWait = 10 * time.Second

// Restart restarts the session named by req (see the top of this file). A
// session that ended (its program exited) is relaunched too; an attached
// session and a post-mortem one answer unsupported.
func (m *Manager) Restart(ctx context.Context, req RestartRequest) (*RestartResult, error) {
	s, err := m.Session(req.SessionID)
	if err != nil {
		return nil, err
	}
	ls := s.launch
	switch {
	case s.core != nil:
		return nil, protocol.Errorf(protocol.CodeUnsupported, "session %s is a post-mortem of a core file: there is no program to restart; start a new session with program", s.id)
	case s.request != "launch" || ls == nil:
		return nil, protocol.Errorf(protocol.CodeUnsupported, "session %s is attached to a process tether did not start: restart relaunches launched programs only; stop it and attach again", s.id)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	// A restart that waited its turn restarts the generation before it.
	if s, err = m.Session(req.SessionID); err != nil {
		return nil, err
	}
	wait := restartWait
	if req.WaitTimeoutMS > 0 {
		wait = time.Duration(req.WaitTimeoutMS) * time.Millisecond
	}
	_, relaunches := s.adapter.(restartRelauncher)
	if c, err := s.live(); err == nil && s.supports("supportsRestartRequest") && !relaunches {
		if res, err := s.restartInPlace(ctx, c, wait); err == nil {
			return res, nil
		} else if ctx.Err() != nil {
			return nil, err
		}
		// The adapter refused: relaunch instead.
	}
	return m.relaunch(ctx, s, wait)
}

// restartInPlace sends DAP restart: the adapter relaunches the program in
// the same session, its breakpoints kept.
func (s *Session) restartInPlace(ctx context.Context, c *Client, wait time.Duration) (*RestartResult, error) {
	s.mu.Lock()
	before := s.stops
	s.runStops = s.stops // the run's first stop is its entry stop again
	s.state, s.exitCode = StateRunning, nil
	s.notifyLocked()
	s.mu.Unlock()
	if err := c.Do(ctx, "restart", map[string]any{"arguments": s.launch.cfg}, nil); err != nil {
		s.mu.Lock()
		if s.state == StateRunning && s.stops == before {
			s.state = StateStopped
			s.notifyLocked()
		}
		s.mu.Unlock()
		return nil, s.adapterError(err)
	}
	if _, err := s.waitStop(ctx, before, boundBy(ctx, wait)); err != nil {
		return nil, err
	}
	cr, _ := s.controlResult(ctx, c, true)
	s.mu.Lock()
	bps := slices.Concat(slices.Collect(mapsValues(s.files))...)
	s.mu.Unlock()
	return &RestartResult{ControlResult: *cr, Method: "restart", Breakpoints: bps}, nil
}

// relaunch ends old (program and adapter) and starts a new session under
// the same id from old's launch, with the breakpoints old held last. The
// new session replaces old in the manager; calls still on old answer
// session_ended.
func (m *Manager) relaunch(ctx context.Context, old *Session, wait time.Duration) (*RestartResult, error) {
	ls := old.launch
	req := ls.req
	old.mu.Lock()
	req.Breakpoints = make([]FileBreakpoints, 0, len(old.askedFiles))
	for _, p := range sortedPaths(old.askedFiles) {
		req.Breakpoints = append(req.Breakpoints, FileBreakpoints{Path: p, Breakpoints: old.askedFiles[p]})
	}
	req.FunctionBreakpoints = old.askedFuncs
	if old.askedFilters != nil {
		req.ExceptionFilters = old.askedFilters
	}
	old.mu.Unlock()

	ctx, done, err := m.beginStart(ctx)
	if err != nil {
		return nil, err
	}
	defer done()

	old.Stop(ctx, nil)
	s := newSession(old.id, old.adapter, m.root)
	s.name, s.request, s.entryStop, s.launch = old.name, old.request, old.entryStop, ls
	res, err := s.handshake(ctx, ls.spec, cloneConfig(ls.cfg), &req, ls.environ)
	if err == nil {
		m.mu.Lock()
		if m.closed {
			err = ErrClosed
		} else {
			m.sessions[s.id] = s
		}
		m.mu.Unlock()
	}
	if err != nil {
		m.log.Info().Str("session_id", s.id).Err(err).Msg("debug session failed to relaunch")
		if s.proc != nil {
			s.Stop(ctx, nil)
		}
		return nil, err
	}
	m.log.Info().Str("session_id", s.id).Msg("debug session relaunched")
	if _, err := s.waitStop(ctx, 0, boundBy(ctx, wait)); err != nil {
		return nil, err
	}
	c, err := s.live()
	var cr *ControlResult
	if err == nil {
		cr, _ = s.controlResult(ctx, c, true)
	} else {
		cr, _ = s.controlResult(ctx, nil, false)
	}
	return &RestartResult{ControlResult: *cr, Method: "relaunch", Breakpoints: res.Breakpoints}, nil
}

func sortedPaths[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func mapsValues[V any](m map[string]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, p := range sortedPaths(m) {
			if !yield(m[p]) {
				return
			}
		}
	}
}
