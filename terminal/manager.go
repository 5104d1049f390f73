//go:build !windows

package terminal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/retain"
	"github.com/tetherdev/tether/protocol"
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("terminal: manager closed")

var errStarting = errors.New("terminal: the visible terminal is starting; try again")

const (
	// stopReserve is how long before the ctx deadline a sync command is
	// stopped, so its partial output can still be answered in time.
	stopReserve = 250 * time.Millisecond
	// returnMargin is how long before the ctx deadline Execute returns
	// even when the stopped command has not exited yet.
	returnMargin = 50 * time.Millisecond
	// cancelWait bounds how long a cancelled call waits for its command
	// to die so its last output is in the answer.
	cancelWait = 250 * time.Millisecond
	// keepEnded is how many ended async sessions stay readable.
	keepEnded = 100
	// maxTimeout keeps a requested timeout from overflowing a Duration.
	maxTimeout = 7 * 24 * time.Hour
)

// Manager runs commands for one workspace root: sync and async, hidden
// or in the visible terminal. All methods are safe for concurrent use.
// Close kills every process a command started and waits for every
// goroutine the Manager owns.
type Manager struct {
	cfg   Config
	root  string
	shell string // runs hidden commands
	bash  string // the visible terminal; "" when there is no bash
	dir   string // private directory for command files
	log   zerolog.Logger
	reap  *reaper // nil without one

	wg      sync.WaitGroup
	closing chan struct{}

	mu       sync.Mutex
	closed   bool
	live     map[*session]struct{}
	sessions map[string]*session // async, by id
	order    []string            // async ids, oldest first

	vt visibleTerminal
}

// New checks cfg and returns a Manager. The visible shell starts with the
// first command that uses it.
func New(cfg Config) (*Manager, error) {
	if cfg.Root == "" {
		return nil, errors.New("terminal: Config.Root is required")
	}
	root, err := filepath.Abs(cfg.Root)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("terminal: resolving root: %w", err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("terminal: root %q is not a directory", root)
	}
	if cfg.OutputCap <= 0 {
		cfg.OutputCap = DefaultOutputCap
	}
	if cfg.RingSize <= 0 {
		cfg.RingSize = DefaultRingSize
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	m := &Manager{
		cfg: cfg, root: root, log: cfg.Logger,
		closing:  make(chan struct{}),
		live:     map[*session]struct{}{},
		sessions: map[string]*session{},
		vt: visibleTerminal{
			subs:       map[chan []byte]struct{}{},
			transcript: newRing(transcriptSize),
		},
	}
	switch {
	case cfg.Shell != "":
		p, err := exec.LookPath(cfg.Shell)
		if err != nil {
			return nil, fmt.Errorf("terminal: shell: %w", err)
		}
		m.shell, m.bash = p, p
	default:
		if p, err := exec.LookPath("bash"); err == nil {
			m.shell, m.bash = p, p
		} else {
			m.shell = "/bin/sh"
		}
	}
	argv, err := reaperArgv(cfg)
	if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	if m.dir, err = os.MkdirTemp("", "tether-terminal-"); err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	if len(argv) > 0 {
		if m.reap, err = startReaper(argv, m.log); err != nil {
			m.log.Warn().Err(err).Msg("no reaper: commands may outlive this process if it is killed without Close")
		}
	} else {
		m.log.Debug().Msg("no reaper: commands may outlive this process if it is killed without Close")
	}
	return m, nil
}

// Execute runs req.Command. A sync command's result comes back when it
// exits, or with timed_out and the output so far when its timeout, the
// ctx deadline (less a reserve to answer in time) or a cancellation
// comes first; its process group is killed then. An async command
// returns its session id at once. Bad input is an invalid_payload
// *protocol.Error.
func (m *Manager) Execute(ctx context.Context, req ExecRequest) (ExecResult, error) {
	sp, err := m.parse(req)
	if err != nil {
		return ExecResult{}, err
	}
	log := m.logger(ctx)
	s := &session{
		id: newSessionID(), command: sp.command, async: sp.async,
		terminal: TerminalHidden, started: time.Now(), done: make(chan struct{}),
	}
	if sp.async {
		s.out = newRing(m.cfg.RingSize)
	} else {
		s.out = newHeadTail(m.cfg.OutputCap)
	}
	if err := m.track(s); err != nil {
		return ExecResult{}, err
	}
	visible, note := false, ""
	if !sp.hidden {
		if m.bash == "" {
			note = "there is no bash for the visible terminal, so this command ran as a hidden process"
		} else {
			visible, note = m.runVisible(ctx, s, sp)
		}
	}
	if !visible {
		cwd := sp.cwd
		if cwd == "" && !sp.hidden {
			cwd = m.visibleCwd() // "in the same cwd" as the busy terminal
		}
		if cwd == "" {
			cwd = m.root
		}
		s.cwd = cwd
		if !sp.async {
			s.stderr = newHeadTail(max(m.cfg.OutputCap/4, 2))
		}
		if err := m.startHidden(s, sp, cwd); err != nil {
			m.untrack(s)
			return ExecResult{}, fmt.Errorf("starting command: %w", err)
		}
		s.addNote(note)
	}
	log.Info().Str("session_id", s.id).Str("terminal", s.terminal).Bool("async", sp.async).
		Str("cwd", s.cwd).Str("command", clip(sp.command)).Msg("command started")
	traceExec(ctx, s)

	if sp.async {
		if sp.timeout > 0 {
			why := fmt.Sprintf("timed out after %s", sp.timeout)
			t := time.AfterFunc(sp.timeout, func() { s.interrupt(why) })
			s.whenDone(func() { t.Stop() })
		}
		m.addAsync(s)
		r := ExecResult{
			Success: true, Command: s.command, SessionID: s.id, Status: StatusRunning,
			Terminal: s.terminal, Cwd: s.cwd,
		}
		// A quick command may have ended already: say so, with its code.
		if s.isDone() {
			r.Status = StatusExited
		}
		s.mu.Lock()
		r.Note = s.note
		if r.Status == StatusExited {
			r.ExitCode = s.exitCode
		}
		s.mu.Unlock()
		return r, nil
	}

	timeout := sp.timeout
	if timeout <= 0 {
		timeout = m.cfg.DefaultTimeout
	}
	stopAt := s.started.Add(timeout)
	var returnBy <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		if t := dl.Add(-stopReserve); t.Before(stopAt) {
			stopAt = t
		}
		rt := time.NewTimer(time.Until(dl.Add(-returnMargin)))
		defer rt.Stop()
		returnBy = rt.C
	}
	stopT := time.NewTimer(time.Until(stopAt))
	defer stopT.Stop()
	why := ""
	select {
	case <-s.done:
	case <-stopT.C:
		why = fmt.Sprintf("timed out after %s", stopAt.Sub(s.started).Round(time.Millisecond))
	case <-ctx.Done():
		why = "cancelled: " + ctx.Err().Error()
	case <-m.closing:
		why = "cancelled: the terminal manager closed"
	}
	if why != "" {
		s.interrupt(why)
		// Give the kill a moment to land so the output is complete, but
		// answer before the ctx deadline; a cancelled caller gets its
		// answer after at most a short wait.
		wait := time.NewTimer(min(m.cfg.KillGrace, cancelWait))
		if ctx.Err() == nil {
			wait.Stop()
		}
		defer wait.Stop()
		select {
		case <-s.done:
		case <-returnBy:
		case <-wait.C:
		}
	}
	r := s.result()
	log.Info().Str("session_id", s.id).Int("exit_code", r.ExitCode).Int64("duration_ms", r.DurationMS).
		Bool("timed_out", r.TimedOut).Bool("truncated", r.Truncated).Msg("command finished")
	return r, nil
}

// Output returns the async session's output from offset, at most
// OutputCap bytes. Offsets count every byte the session ever wrote, so
// consecutive calls from each NextOffset never lose or repeat a byte
// while the ring holds them; Missed tells how many it no longer did.
func (m *Manager) Output(sessionID string, offset int64) (OutputResult, error) {
	s, err := m.lookup(sessionID)
	if err != nil {
		return OutputResult{}, err
	}
	r, err := s.read(offset, m.cfg.OutputCap)
	if err != nil {
		return OutputResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "%v", err)
	}
	return r, nil
}

// Input writes data to the async session's stdin and closes it after
// when eof is set. For a command in the visible terminal the data is
// typed into the terminal. It waits while the command is not reading,
// until ctx ends.
func (m *Manager) Input(ctx context.Context, sessionID, data string, eof bool) error {
	s, r, err := m.running(sessionID)
	if err != nil {
		return err
	}
	return s.failed(r.input(ctx, []byte(data), eof), "writing to")
}

// Signal delivers the named signal ("SIGINT", "TERM", ...) to the async
// session's process group: the foreground job for a command in the
// visible terminal.
func (m *Manager) Signal(sessionID, signal string) error {
	sig, err := ParseSignal(signal)
	if err != nil {
		return err
	}
	s, r, err := m.running(sessionID)
	if err != nil {
		return err
	}
	if err := s.failed(r.signal(sig), "signalling"); err != nil {
		return err
	}
	m.log.Info().Str("session_id", sessionID).Str("signal", unixSignalName(sig)).Msg("signal delivered")
	return nil
}

// Sessions lists the async sessions, running and recently ended, oldest
// first.
func (m *Manager) Sessions() []SessionInfo {
	m.mu.Lock()
	ss := make([]*session, 0, len(m.order))
	for _, id := range m.order {
		ss = append(ss, m.sessions[id])
	}
	m.mu.Unlock()
	out := make([]SessionInfo, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.info())
	}
	return out
}

// Close kills every command's process group and the visible shell
// (SIGTERM, SIGKILL after KillGrace), ends attached viewers and waits
// for the Manager's goroutines. Sync calls in flight return with
// timed_out. Later calls fail with ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return nil
	}
	m.closed = true
	close(m.closing)
	live := make([]*session, 0, len(m.live))
	for s := range m.live {
		live = append(live, s)
	}
	m.mu.Unlock()

	for _, s := range live {
		s.interrupt("cancelled: the terminal manager closed")
	}
	m.vt.mu.Lock()
	sh := m.vt.sh
	if sh != nil {
		sh.resetReason = "the terminal manager closed"
	}
	for ch := range m.vt.subs {
		delete(m.vt.subs, ch)
		close(ch)
	}
	m.vt.mu.Unlock()
	if sh != nil {
		terminateSession(context.Background(), sh.pid, m.cfg.KillGrace, syscall.SIGHUP, syscall.SIGTERM)
	}
	m.wg.Wait()
	m.reap.close()
	return os.RemoveAll(m.dir)
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// spawn runs f on a goroutine Close waits for. After Close began it does
// nothing and returns false.
func (m *Manager) spawn(f func()) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
	return true
}

// track registers a starting session so Close can stop it.
func (m *Manager) track(s *session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if s.async {
		running := 0
		for _, o := range m.sessions {
			if !o.isDone() {
				running++
			}
		}
		if running >= m.cfg.MaxSessions {
			return protocol.Errorf(protocol.CodeOverloaded, "%d async sessions are running, the most allowed", running)
		}
	}
	m.live[s] = struct{}{}
	s.onDone = append(s.onDone, func() { m.untrack(s) }) // s is not shared yet
	return nil
}

func (m *Manager) untrack(s *session) {
	m.mu.Lock()
	delete(m.live, s)
	m.mu.Unlock()
}

// addAsync makes s findable by id, dropping the oldest ended sessions
// beyond keepEnded.
func (m *Manager) addAsync(s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[s.id] = s
	m.order = retain.Prune(append(m.order, s.id), m.sessions, (*session).isDone, keepEnded)
}

func (m *Manager) lookup(id string) (*session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	s, ok := m.sessions[id]
	if !ok {
		return nil, protocol.Errorf(protocol.CodeSessionNotFound, "no session %q", id)
	}
	return s, nil
}

func ended(s *session) error {
	return protocol.Errorf(protocol.CodeSessionEnded, "session %s has ended", s.id)
}

// running returns the async session id names and its runner, or
// session_ended when it no longer runs.
func (m *Manager) running(id string) (*session, runner, error) {
	s, err := m.lookup(id)
	if err != nil {
		return nil, nil, err
	}
	r := s.runnerOf()
	if s.isDone() || r == nil {
		return nil, nil, ended(s)
	}
	return s, r, nil
}

// failed is the answer to a runner operation on s (doing is "writing to",
// "signalling") that returned err: nil for nil, session_ended when the
// process was gone meanwhile.
func (s *session) failed(err error, doing string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errGone):
		return ended(s)
	default:
		return fmt.Errorf("%s session %s: %w", doing, s.id, err)
	}
}

// visibleCwd is the visible shell's current directory, or "" without one.
func (m *Manager) visibleCwd() string {
	m.vt.mu.Lock()
	sh := m.vt.sh
	m.vt.mu.Unlock()
	if sh == nil {
		return ""
	}
	return sh.cwd()
}

// logger prefers the logger in ctx, which carries the call's
// correlation_id, endpoint and workspace_id.
func (m *Manager) logger(ctx context.Context) zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return *l
	}
	return m.log
}

func newSessionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}

// newNonce returns 32 random hex digits.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
