//go:build !windows

package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/internal/retain"
	"github.com/tetherdev/tether/internal/ring"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

// Async exec sessions: the terminal's model (package terminal) for a
// workspace's runtime. An async exec answers a session_id at once; the
// command's output goes to a ring read by offset, its stdin takes input,
// its process tree takes signals. A session ends with its command, or
// with its runtime (Release, eviction, Close, a container that died:
// ended_by runtime_stopped). Ended sessions stay readable for
// Config.SessionKeep, then are forgotten.

// Defaults of the session bounds in Config.
const (
	DefaultMaxSessions = 8
	DefaultSessionRing = 1 << 20
	DefaultSessionKeep = 5 * time.Minute
	// keepEndedSessions bounds the ended sessions kept, whatever their age.
	keepEndedSessions = 100
	// sessionEndWait bounds how long Release waits for its sessions'
	// commands to be reaped.
	sessionEndWait = 10 * time.Second
)

// execSession is one async command. Its waiter goroutine records the end;
// readers take snapshots. All methods are safe for concurrent use.
type execSession struct {
	id, workspace, command, cwd string
	started                     time.Time
	proc                        Process
	done                        chan struct{} // closed when it ended

	mu       sync.Mutex
	out      *ring.Ring
	ended    time.Time
	exitCode int
	timedOut bool
	endedBy  string
	errMsg   string
}

// Write takes the command's output (stdout and stderr, concurrently).
func (e *execSession) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.out.Write(p)
}

func (e *execSession) isDone() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// endedBefore reports whether it ended before t.
func (e *execSession) endedBefore(t time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.ended.IsZero() && e.ended.Before(t)
}

func (e *execSession) finish(now time.Time, code int, err error) {
	e.mu.Lock()
	e.ended, e.exitCode = now, code
	if err != nil {
		e.endedBy, e.errMsg = protocol.CodeInternalError, err.Error()
		if pe, ok := errors.AsType[*protocol.Error](err); ok {
			e.endedBy, e.errMsg = pe.Code, pe.Message
		}
	}
	e.mu.Unlock()
	close(e.done)
}

func (e *execSession) info() SessionInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := SessionInfo{SessionID: e.id, Command: e.command, Cwd: e.cwd, Status: SessionRunning,
		TimedOut: e.timedOut, StartedAt: e.started, OutputBytes: e.out.Total(), EndedBy: e.endedBy, Error: e.errMsg}
	if !e.ended.IsZero() {
		code, end := e.exitCode, e.ended
		in.Status, in.ExitCode, in.EndedAt = SessionExited, &code, &end
	}
	return in
}

func (e *execSession) read(offset int64, limit int) (protocol.SessionOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	running := e.ended.IsZero()
	p, start, err := e.out.Chunk(offset, limit, running)
	if err != nil {
		return protocol.SessionOutput{}, protocol.Errorf(protocol.CodeInvalidPayload, "offset: %v", err)
	}
	end := start + int64(len(p))
	r := protocol.SessionOutput{Output: string(p), Offset: start, NextOffset: end, Missed: start - offset,
		More: end < e.out.Total(), Running: running, TimedOut: e.timedOut, EndedBy: e.endedBy, Error: e.errMsg}
	if !running {
		code := e.exitCode
		r.ExitCode = &code
	}
	return r, nil
}

// sessionTable holds every workspace's sessions, oldest first.
type sessionTable struct {
	wg    sync.WaitGroup // the waiters
	mu    sync.Mutex
	byID  map[string]*execSession
	order []string
}

// live returns the workspace's running sessions (every workspace's for
// "").
func (t *sessionTable) live(ws string) []*execSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*execSession
	for _, e := range t.byID {
		if (ws == "" || e.workspace == ws) && !e.isDone() {
			out = append(out, e)
		}
	}
	return out
}

// prune forgets ended sessions past keep, and the oldest ended beyond
// keepEndedSessions. Called with t.mu held.
func (t *sessionTable) prune(now time.Time, keep time.Duration) {
	old := now.Add(-keep)
	for i := 0; i < len(t.order); {
		if id := t.order[i]; t.byID[id].endedBefore(old) {
			delete(t.byID, id)
			t.order = append(t.order[:i], t.order[i+1:]...)
			continue
		}
		i++
	}
	t.order = retain.Prune(t.order, t.byID, (*execSession).isDone, keepEndedSessions)
}

// startSession runs req as an async session in the workspace: called from
// Exec with the workspace lock held, req.dir resolved and rel its cwd.
func (s *Service) startSession(ctx context.Context, rec *Record, rt Runtime, req ExecRequest, rel string) (ExecResult, error) {
	t := &s.sessions
	t.mu.Lock()
	t.prune(s.cfg.Now(), s.cfg.SessionKeep)
	t.mu.Unlock()
	// The workspace lock keeps another start from passing this check
	// meanwhile.
	if n := len(t.live(rec.ID)); n >= s.cfg.MaxSessions {
		return ExecResult{}, protocol.Errorf(protocol.CodeOverloaded, "workspace %s has %d async sessions running, the most allowed; end one (signal KILL) first", rec.ID, n)
	}
	var tag [8]byte
	_, _ = rand.Read(tag[:])
	e := &execSession{id: "sx-" + hex.EncodeToString(tag[:]), workspace: rec.ID, command: req.Command, cwd: rel,
		started: s.cfg.Now(), done: make(chan struct{}), out: ring.New(s.cfg.SessionRing)}
	// Counted before it starts, under the lock Close takes to stop the
	// runtimes, so Close either waits for it or it starts nothing.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ExecResult{}, ErrClosed
	}
	t.wg.Add(1)
	s.mu.Unlock()
	proc, err := rt.Start(ctx, req, e)
	if err != nil {
		t.wg.Done()
		return ExecResult{}, err
	}
	e.proc = proc
	t.mu.Lock()
	if t.byID == nil {
		t.byID = map[string]*execSession{}
	}
	t.byID[e.id] = e
	t.order = append(t.order, e.id)
	t.mu.Unlock()
	go s.waitSession(e, req)
	s.logger(ctx).Info().Str("sandbox_workspace", rec.ID).Str("session_id", e.id).Msg("sandbox session started")
	return ExecResult{Success: true, Command: req.Command, SessionID: e.id, Status: SessionRunning, Cwd: rel}, nil
}

// waitSession feeds the session its whole stdin when the request gave
// one, applies its timeout, and records its end.
func (s *Service) waitSession(e *execSession, req ExecRequest) {
	defer s.sessions.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var feeding sync.WaitGroup
	if req.Stdin != "" {
		feeding.Add(1)
		go func() {
			defer feeding.Done()
			_ = e.proc.Input(ctx, []byte(req.Stdin), true)
		}()
	}
	if req.Timeout > 0 {
		limit := req.Limit()
		tm := time.AfterFunc(limit, func() {
			e.mu.Lock()
			e.timedOut = true
			e.mu.Unlock()
			_ = e.proc.Signal(syscall.SIGKILL)
		})
		defer tm.Stop()
	}
	code, err := e.proc.Wait()
	cancel()
	e.finish(s.cfg.Now(), code, err)
	feeding.Wait()
	s.mu.Lock()
	if l, ok := s.live[e.workspace]; ok {
		l.used = s.cfg.Now() // a long session is use until its end
		s.live[e.workspace] = l
	}
	s.mu.Unlock()
}

// session returns the workspace's session id.
func (s *Service) session(ws, id string) (*execSession, error) {
	if _, err := s.workspace(ws); err != nil {
		return nil, err
	}
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune(s.cfg.Now(), s.cfg.SessionKeep)
	if e, ok := t.byID[id]; ok && e.workspace == ws {
		return e, nil
	}
	return nil, protocol.Errorf(protocol.CodeSessionNotFound, "session_id: no session %q in workspace %s (ended sessions are kept %s)", id, ws, s.cfg.SessionKeep)
}

func sessionEnded(e *execSession) error {
	return protocol.Errorf(protocol.CodeSessionEnded, "session %s has ended", e.id)
}

// SessionOutput returns the session's output from offset, at most
// OutputCap bytes; see protocol.SessionOutput.
func (s *Service) SessionOutput(_ context.Context, ws, id string, req protocol.SessionOutputRequest) (protocol.SessionOutput, error) {
	e, err := s.session(ws, id)
	if err != nil {
		return protocol.SessionOutput{}, err
	}
	return e.read(req.Offset, s.cfg.OutputCap)
}

// SessionInput writes data to the session's stdin, closing it after when
// eof is set. It waits while the command does not read, until ctx ends.
func (s *Service) SessionInput(ctx context.Context, ws, id string, req protocol.SessionInputRequest) (protocol.InputResult, error) {
	e, err := s.session(ws, id)
	if err != nil {
		return protocol.InputResult{}, err
	}
	if e.isDone() {
		return protocol.InputResult{}, sessionEnded(e)
	}
	if err := e.proc.Input(ctx, []byte(req.Data), req.EOF); err != nil {
		if errors.Is(err, ErrProcessDone) {
			return protocol.InputResult{}, sessionEnded(e)
		}
		return protocol.InputResult{}, err
	}
	return protocol.InputResult{SessionID: id, Bytes: len(req.Data), EOF: req.EOF}, nil
}

// SessionSignal delivers a signal ("INT", "SIGTERM", "kill": the
// terminal's names) to the session's whole process tree.
func (s *Service) SessionSignal(ctx context.Context, ws, id string, req protocol.SessionSignalRequest) (protocol.SignalResult, error) {
	sig, err := terminal.ParseSignal(req.Signal)
	if err != nil {
		return protocol.SignalResult{}, err
	}
	e, err := s.session(ws, id)
	if err != nil {
		return protocol.SignalResult{}, err
	}
	if e.isDone() {
		return protocol.SignalResult{}, sessionEnded(e)
	}
	if err := e.proc.Signal(sig); err != nil {
		if errors.Is(err, ErrProcessDone) {
			return protocol.SignalResult{}, sessionEnded(e)
		}
		return protocol.SignalResult{}, err
	}
	s.logger(ctx).Info().Str("sandbox_workspace", ws).Str("session_id", id).Str("signal", unix.SignalName(sig)).Msg("sandbox session signalled")
	return protocol.SignalResult{SessionID: id, Signal: unix.SignalName(sig)}, nil
}

// SessionEnd kills the session's process tree and answers once it has
// ended, with its last state; an ended session is answered as it is.
func (s *Service) SessionEnd(ctx context.Context, ws, id string, _ struct{}) (SessionInfo, error) {
	e, err := s.session(ws, id)
	if err != nil {
		return SessionInfo{}, err
	}
	if !e.isDone() {
		if err := e.proc.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, ErrProcessDone) {
			return SessionInfo{}, err
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return SessionInfo{}, protocol.Errorf(protocol.CodeTimeout, "session %s was sent KILL and had not ended when the call ended", id)
		}
	}
	return e.info(), nil
}

// Sessions lists the workspace's async sessions, running and recently
// ended, oldest first.
func (s *Service) Sessions(_ context.Context, ws string, _ struct{}) (SessionsResult, error) {
	if _, err := s.workspace(ws); err != nil {
		return SessionsResult{}, err
	}
	t := &s.sessions
	t.mu.Lock()
	t.prune(s.cfg.Now(), s.cfg.SessionKeep)
	var es []*execSession
	for _, id := range t.order {
		if e := t.byID[id]; e.workspace == ws {
			es = append(es, e)
		}
	}
	t.mu.Unlock()
	out := SessionsResult{WorkspaceID: ws, Sessions: make([]SessionInfo, 0, len(es))}
	for _, e := range es {
		out.Sessions = append(out.Sessions, e.info())
	}
	return out, nil
}

// awaitSessions waits, up to sessionEndWait, for the sessions (of ws, or
// all for "") to end: after their runtime was stopped, so none is left
// running when Release or Close returns.
func (s *Service) awaitSessions(ws string) {
	deadline := time.NewTimer(sessionEndWait)
	defer deadline.Stop()
	for _, e := range s.sessions.live(ws) {
		select {
		case <-e.done:
		case <-deadline.C:
			s.log.Warn().Str("sandbox_workspace", ws).Str("session_id", e.id).Msg("a sandbox session did not end with its runtime")
			return
		}
	}
}
