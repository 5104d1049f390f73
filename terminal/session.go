//go:build !windows

package terminal

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// runner is what a session runs on: a hidden process or the visible shell.
type runner interface {
	// input writes p to the command's stdin, closing it after when eof.
	input(ctx context.Context, p []byte, eof bool) error
	// signal delivers sig to the command's process group.
	signal(sig syscall.Signal) error
	// stop starts ending the command (SIGTERM then SIGKILL for a process
	// group; interrupt, then reset, for the visible shell). It returns at
	// once and may be called more than once.
	stop()
}

// sink is where a session's output goes: a ring for async sessions, a
// head-and-tail capture for sync ones.
type sink interface {
	Write(p []byte) (int, error)
	Total() int64
}

// session is one command, sync or async. Its runner writes output and
// calls finish; readers take snapshots. All methods are safe for
// concurrent use.
type session struct {
	id       string
	command  string
	cwd      string
	terminal string
	async    bool
	started  time.Time
	done     chan struct{} // closed by finish

	mu       sync.Mutex
	run      runner
	pid      int
	out      sink
	stderr   *headTail // hidden sync sessions only
	ended    time.Time
	exitCode int
	timedOut bool
	why      string // why it was interrupted
	note     string
	onDone   []func()
}

func (s *session) setRunner(r runner, pid int) {
	s.mu.Lock()
	s.run, s.pid = r, pid
	s.mu.Unlock()
}

func (s *session) runnerOf() runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}

func (s *session) writeOut(p []byte) {
	s.mu.Lock()
	_, _ = s.out.Write(p)
	s.mu.Unlock()
}

func (s *session) writeErr(p []byte) {
	s.mu.Lock()
	_, _ = s.out.Write(p)
	if s.stderr != nil {
		_, _ = s.stderr.Write(p)
	}
	s.mu.Unlock()
}

func (s *session) addNote(note string) {
	if note == "" {
		return
	}
	s.mu.Lock()
	if s.note == "" {
		s.note = note
	} else {
		s.note += "; " + note
	}
	s.mu.Unlock()
}

// finish records the exit. Only the first call counts.
func (s *session) finish(code int, note string) {
	s.mu.Lock()
	if !s.ended.IsZero() {
		s.mu.Unlock()
		return
	}
	s.ended = time.Now()
	s.exitCode = code
	fs := s.onDone
	s.onDone = nil
	s.mu.Unlock()
	s.addNote(note)
	close(s.done)
	for _, f := range fs {
		f()
	}
}

// whenDone runs f when the session finishes, or now if it has.
func (s *session) whenDone(f func()) {
	s.mu.Lock()
	if s.ended.IsZero() {
		s.onDone = append(s.onDone, f)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	f()
}

func (s *session) isDone() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// interrupt ends the command because its time is up or its caller left.
func (s *session) interrupt(why string) {
	s.mu.Lock()
	if s.ended.IsZero() && !s.timedOut {
		s.timedOut, s.why = true, why
	}
	r := s.run
	s.mu.Unlock()
	if r != nil {
		r.stop()
	}
}

// result snapshots a sync session. A session still running (its caller
// stopped waiting) reports exit code -1.
func (s *session) result() ExecResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := ExecResult{
		Command:  s.command,
		Terminal: s.terminal,
		Cwd:      s.cwd,
		TimedOut: s.timedOut,
		Note:     s.note,
	}
	end := s.ended
	r.ExitCode = s.exitCode
	if end.IsZero() {
		end = time.Now()
		r.ExitCode = -1
	}
	r.DurationMS = end.Sub(s.started).Milliseconds()
	if ht, ok := s.out.(*headTail); ok {
		r.Output, r.Truncated = ht.String()
	}
	r.Success = r.ExitCode == 0 && !r.TimedOut
	var stderr string
	if s.stderr != nil {
		stderr, _ = s.stderr.String()
	}
	switch {
	case r.Success:
	case stderr != "":
		r.Error = stderr
	case r.TimedOut:
		r.Error = s.why
	default:
		r.Error = fmt.Sprintf("exit status %d", r.ExitCode)
	}
	return r
}

func (s *session) info() SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := SessionInfo{
		SessionID:   s.id,
		Command:     s.command,
		Status:      StatusRunning,
		TimedOut:    s.timedOut,
		StartedAt:   s.started,
		Terminal:    s.terminal,
		Cwd:         s.cwd,
		OutputBytes: s.out.Total(),
	}
	if s.terminal == TerminalHidden {
		in.PID = s.pid
	}
	if !s.ended.IsZero() {
		in.Status = StatusExited
		code, end := s.exitCode, s.ended
		in.ExitCode, in.EndedAt = &code, &end
	}
	return in
}

// read returns up to limit bytes of an async session's output from
// offset (ring.Chunk's rules).
func (s *session) read(offset int64, limit int) (OutputResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rg := s.out.(*ring)
	p, start, err := rg.Chunk(offset, limit, s.ended.IsZero())
	if err != nil {
		return OutputResult{}, err
	}
	end := start + int64(len(p))
	r := OutputResult{
		Output:     string(p),
		Offset:     start,
		NextOffset: end,
		Missed:     start - offset,
		More:       end < rg.Total(),
		Running:    s.ended.IsZero(),
		TimedOut:   s.timedOut,
	}
	if !r.Running {
		code := s.exitCode
		r.ExitCode = &code
	}
	return r, nil
}
