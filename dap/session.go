//go:build !windows

package dap

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/protocol"
)

// Session is one debuggee driven through one adapter process. Its state
// changes on the client's read goroutine (events) and on requests; every
// method is safe for concurrent use. This file holds the state machine; the
// session's other jobs are in the session_*.go files (see the package doc).
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
	said      *saidLog // the adapter's own console/stderr lines (failure.go)
	entryStop bool     // stopOnEntry was asked: the first stop is "entry"
	// childSessions: the adapter runs the debuggee in a child session
	// (session_children.go); set before the adapter starts.
	childSessions bool
	// paths maps breakpoint paths out and frame paths back (attach.go);
	// set before the adapter starts, read-only after.
	paths pathMap
	// core is the core dump of a post-mortem session (session_postmortem.go).
	core *coreInfo
	// launch is how the session was started, for restart (session_restart.go).
	launch *launchSpec
	// warm is the manager's pool of warm adapters (warm.go), nil when they
	// are off; warmUsed says the adapter came from it.
	warm     *warmPool
	warmUsed bool
	// refill has the pool make the next warm adapter of this kind; called
	// once the session has ended (end). Set before the adapter starts.
	refill func()

	initialized     chan struct{}
	initializedOnce sync.Once
	watcherDone     chan struct{}
	stopOnce        sync.Once
	stopCtx         context.Context // cancelled when Stop begins
	stopCancel      context.CancelFunc
	childWG         sync.WaitGroup // child sessions starting
	// startSpan is the span of the start-session call (invalid when
	// untraced): a child session's requests hang under it (trace.go).
	startSpan trace.SpanContext

	mu          sync.Mutex
	state       string
	stop        *StopInfo
	stops       int           // stopped events so far
	runStops    int           // stops when the program's current run began (a restart in place)
	changed     chan struct{} // closed and replaced on every change
	exitCode    *int
	endReason   string
	debuggeePid int
	stopping    bool                    // Stop was called: the adapter's exit is expected
	pausing     bool                    // a pause was sent and no stop came yet
	files       map[string][]Breakpoint // per-file results, by absolute path
	funcs       []Breakpoint
	// What was asked, to send again to a child session.
	askedFiles   map[string][]SourceBreakpoint
	askedFuncs   []FunctionBreakpoint
	askedFilters []string
	child        *childSession // the debuggee's session, once the adapter started one
}

func newSession(id string, a Adapter, root string) *Session {
	stopCtx, stopCancel := context.WithCancel(context.Background())
	return &Session{
		stopCtx:     stopCtx,
		stopCancel:  stopCancel,
		id:          id,
		adapter:     a,
		root:        root,
		started:     time.Now(),
		out:         newOutputBuffer(4 << 20),
		said:        &saidLog{max: failureBytes},
		initialized: make(chan struct{}),
		watcherDone: make(chan struct{}),
		state:       StateInitializing,
		changed:     make(chan struct{}),
		files:       map[string][]Breakpoint{},
		askedFiles:  map[string][]SourceBreakpoint{},
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
		if f, ok := s.adapter.(stopFixer); ok {
			f.fixStop(st, stopContext{first: s.stops == s.runStops, entry: s.entryStop, pausing: s.pausing})
		}
		if s.core != nil {
			st.Signal = s.core.signal
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
		s.noteSaid(m.AfterSeq, b.Category, b.Output)
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

// assumePaused records a pause the adapter did not report (see
// pauseConfirmer), unless some stop or a continue came meanwhile.
func (s *Session) assumePaused(thread, before int, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateRunning && s.stops == before {
		s.state = StateStopped
		s.stop = &StopInfo{Reason: "pause", Description: why, ThreadID: thread, AllThreadsStopped: true}
		s.stops++
		s.notifyLocked()
	}
}

// Adapter names the session's debug adapter (set when the session is
// made, never changed).
func (s *Session) Adapter() string { return s.adapter.Name() }

// Info describes the session for list-sessions.
func (s *Session) Info() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionInfo{SessionID: s.id, Adapter: s.adapter.Name(), Name: s.name, Request: s.request,
		State: s.state, Stop: s.stopIfStoppedLocked(), ExitCode: s.exitCode, EndReason: s.endReason, StartedAt: s.started}
}

// retired reports whether the session has ended and nothing of it runs any
// more: its adapter's connection is gone and the watcher that cleans up
// after it returned (an adapter may outlive its debuggee's end until Stop).
// The manager calls it with its own lock held (s.mu is taken after it).
func (s *Session) retired() bool {
	select {
	case <-s.watcherDone:
	default:
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == StateEnded
}

func (s *Session) stopIfStoppedLocked() *StopInfo {
	if s.state == StateStopped {
		return s.stop
	}
	return nil
}

// live returns the client of the debuggee (a child session's once there
// is one), or session_ended.
func (s *Session) live() (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateEnded {
		return nil, s.endedErrorLocked()
	}
	if s.child != nil {
		return s.child.client, nil
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
	var re *ResponseError
	if errors.As(err, &re) {
		return s.requestFailed(re)
	}
	return err
}
