//go:build !windows

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/protocol"
)

// ExecRequest is the payload of exec.
type ExecRequest struct {
	// Command is a shell command line, run with /bin/sh -c.
	Command string `json:"command"`
	// Cwd is a directory relative to the worktree; default the worktree.
	Cwd string `json:"cwd,omitempty"`
	// Env is added to the runtime's allow-listed environment.
	Env map[string]string `json:"env,omitempty"`
	// Timeout is in seconds; default DefaultExecTimeout, at most
	// MaxExecTimeout, and never past the call's deadline.
	Timeout float64 `json:"timeout,omitempty"`
	// Stdin is the command's whole input; default none. An async
	// command without it reads what the session's input route sends.
	Stdin string `json:"stdin,omitempty"`
	// Mode is "sync" (the default: the answer is the command's result)
	// or "async" (the answer is a session_id at once; see Service.Start).
	// An async command has no timeout unless Timeout is given.
	Mode string `json:"mode,omitempty"`
	// TTY runs an async command on a terminal (a pty on the host, the
	// engine's tty in a container; 24 rows of 80 columns) instead of
	// pipes: programs see a terminal, prompt and edit lines, and the
	// output is what a terminal would show (input echoed, CRLF line
	// ends, stdout and stderr as one). Input with eof sends the terminal's
	// end-of-file (Ctrl-D). Only with mode async.
	TTY bool `json:"tty,omitempty"`

	// dir is Cwd resolved inside the worktree, set by Service.
	dir string
}

// Dir is the absolute directory the command runs in: Cwd resolved inside
// the worktree by the Service, which checked it is a directory there.
func (r *ExecRequest) Dir() string { return r.dir }

// Limit is how long the command may run: Timeout, or DefaultExecTimeout,
// at most MaxExecTimeout. The call's own deadline may end it sooner.
func (r *ExecRequest) Limit() time.Duration {
	if r.Timeout > 0 {
		return min(time.Duration(r.Timeout*float64(time.Second)), MaxExecTimeout)
	}
	return DefaultExecTimeout
}

// StoppedAfter is the Error of a result whose command was stopped (its
// timeout, or its call's end) after d.
func StoppedAfter(d time.Duration) string {
	return fmt.Sprintf("the command was stopped after %s", d.Round(time.Millisecond))
}

// RequestEnv is a request's env as NAME=value entries; a bad name or a
// value holding a NUL answers invalid_payload. Every runtime takes a
// command's env through it.
func RequestEnv(env map[string]string) ([]string, error) {
	out := make([]string, 0, len(env))
	for k, v := range env {
		if !envKeyRe.MatchString(k) || strings.IndexByte(v, 0) >= 0 {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "env %q: bad name or value", k)
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}

// ExecResult has the shape of a terminal result: {success, command,
// output, error, exit_code, duration_ms, timed_out, truncated}.
type ExecResult struct {
	Success bool   `json:"success"`
	Command string `json:"command"`
	// Output is stdout and stderr together, capped at OutputCap bytes.
	Output     string `json:"output"`
	Error      string `json:"error"`
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	Truncated  bool   `json:"truncated"`
	// OOMKilled: the kernel killed the command (or part of it) because its
	// container reached its memory limit (runtime container).
	OOMKilled bool `json:"oom_killed,omitempty"`
	// SessionID and Status answer an async exec, which then encodes as
	// {success, command, session_id, status, cwd} (the terminal's async
	// shape), so it carries no exit_code a client could take for an exit.
	SessionID string `json:"session_id,omitempty"`
	Status    string `json:"status,omitempty"`
	// Cwd is the directory, relative to the worktree, an async command
	// started in.
	Cwd string `json:"cwd,omitempty"`
}

type asyncExecJSON struct {
	Success   bool   `json:"success"`
	Command   string `json:"command"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Cwd       string `json:"cwd"`
}

// MarshalJSON writes the sync or the async shape.
func (r ExecResult) MarshalJSON() ([]byte, error) {
	if r.SessionID != "" {
		return json.Marshal(asyncExecJSON{Success: r.Success, Command: r.Command, SessionID: r.SessionID, Status: r.Status, Cwd: r.Cwd})
	}
	type syncShape ExecResult // without the method, so Marshal does not recurse
	plain := syncShape(r)
	plain.Status, plain.Cwd = "", ""
	return json.Marshal(plain)
}

// Defaults of command execution.
const (
	DefaultExecTimeout = 2 * time.Minute
	MaxExecTimeout     = 30 * time.Minute
	DefaultOutputCap   = 80000
)

// execEnvAllow are the variables of tether's environment a command sees;
// everything else (tokens, cloud credentials) is left out.
var execEnvAllow = []string{"PATH", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME"}

var envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func commandEnv(home string, extra map[string]string) ([]string, error) {
	env := []string{"HOME=" + home, "GIT_TERMINAL_PROMPT=0"}
	for _, k := range execEnvAllow {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	req, err := RequestEnv(extra)
	if err != nil {
		return nil, err
	}
	return append(env, req...), nil
}

// procRunner runs commands each in its own process group, so a timeout or
// Stop ends everything a command started. Runtimes embed it.
type procRunner struct {
	outputCap int

	mu      sync.Mutex
	running map[int]struct{} // process group ids
	stopped bool
}

// ErrRuntimeStopped answers a command racing a stop of its workspace's
// runtime (a release, an eviction, the bridge's close), whether it was
// waiting to start or running: every runtime answers it so.
var ErrRuntimeStopped = protocol.Errorf(protocol.CodeRuntimeStopped, "the workspace's runtime was stopped (released, evicted or closed) while the command waited or ran")

func (p *procRunner) run(ctx context.Context, argv []string, dir string, env []string, req ExecRequest) (ExecResult, error) {
	ctx, cancel := context.WithTimeout(ctx, req.Limit())
	defer cancel()

	cap := p.outputCap
	out := NewCappedBuffer(cap)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = out, out
	if req.Stdin != "" {
		cmd.Stdin = strings.NewReader(req.Stdin)
	}
	cmd.WaitDelay = 2 * time.Second

	start := time.Now()
	pgid, err := p.startGroup(cmd)
	if err != nil {
		return ExecResult{}, err
	}

	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	p.endGroup(pgid)

	res := ExecResult{
		Command:    req.Command,
		Output:     out.String(),
		Truncated:  out.Truncated(),
		DurationMS: time.Since(start).Milliseconds(),
		ExitCode:   proctree.ExitStatus(cmd.ProcessState),
	}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res.TimedOut = true
		res.ExitCode = -1
		res.Error = StoppedAfter(time.Since(start))
	case err == nil:
		res.Success = true
	case errors.As(err, &exitErr):
		res.Error = exitErr.Error()
	default:
		res.Error = err.Error()
	}
	return res, nil
}

// startGroup starts cmd as the leader of its own process group, so a
// timeout or Stop ends all it started (and the bridge's death kills it),
// and counts the group as running for stop; once the runtime was stopped
// it starts nothing. Every command of a host runtime starts here.
func (p *procRunner) startGroup(cmd *exec.Cmd) (pgid int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return 0, ErrRuntimeStopped
	}
	if err := proctree.Start(cmd); err != nil {
		return 0, fmt.Errorf("starting the command: %w", err)
	}
	if p.running == nil {
		p.running = make(map[int]struct{})
	}
	p.running[cmd.Process.Pid] = struct{}{}
	return cmd.Process.Pid, nil
}

// endGroup follows a started command's reaping: whatever it left running
// in its group goes with it, and the group is no longer counted. It
// reports whether the runtime was stopped, which ended the command.
func (p *procRunner) endGroup(pgid int) (stopped bool) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	proctree.Forget(pgid)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, pgid)
	return p.stopped
}

func (p *procRunner) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for pgid := range p.running {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// CappedBuffer keeps the first cap bytes written to it and notes that
// more came: a command's output. It is safe for concurrent writes (a
// command's stdout and stderr).
type CappedBuffer struct {
	mu        sync.Mutex
	buf       []byte
	cap       int
	truncated bool
}

// NewCappedBuffer returns a CappedBuffer of cap bytes; cap <= 0 means
// DefaultOutputCap.
func NewCappedBuffer(cap int) *CappedBuffer {
	if cap <= 0 {
		cap = DefaultOutputCap
	}
	return &CappedBuffer{cap: cap}
}

// Truncated reports whether more was written than kept.
func (b *CappedBuffer) Truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.truncated
}

// Write keeps what fits and never fails, so a command never blocks on a
// full buffer.
func (b *CappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.cap - len(b.buf)
	if room < len(p) {
		b.truncated = true
		if room > 0 {
			b.buf = append(b.buf, p[:room]...)
		}
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// String is the kept output, invalid UTF-8 replaced.
func (b *CappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.ToValidUTF8(string(b.buf), "\uFFFD")
}
