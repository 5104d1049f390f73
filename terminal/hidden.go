//go:build !windows

package terminal

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/protocol"
)

// drainTimeout bounds how long output is read after a command's session
// has emptied. Pipes then hit EOF at once unless a process that left the
// session (setsid) still holds them.
const drainTimeout = 500 * time.Millisecond

// hiddenProc runs a command as `shell -c command`, the leader of a new
// session and process group with no controlling terminal, so a prompt
// that opens /dev/tty fails instead of hanging and the whole group can be
// signalled at once.
type hiddenProc struct {
	m      *Manager
	s      *session
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File      // nil when stdin is /dev/null
	wsem   chan struct{} // one stdin writer at a time
	stopCh chan struct{}
	once   sync.Once
}

var _ runner = (*hiddenProc)(nil)

// startHidden starts s as a hidden process in cwd. keepStdin leaves stdin
// open for Input (async sessions); otherwise stdin is the given text or
// /dev/null.
func (m *Manager) startHidden(s *session, sp spec, cwd string) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return err
	}
	var inR, inW *os.File
	if sp.async || sp.stdin != nil {
		inR, inW, err = os.Pipe()
	} else {
		inR, err = os.Open(os.DevNull)
	}
	if err != nil {
		closeAll(outR, outW, errR, errW)
		return err
	}
	cmd := exec.Command(m.shell, "-c", sp.command)
	cmd.Dir = cwd
	cmd.Env = mergeEnv(os.Environ(), sp.env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// The reaper ends the session if this process dies without Close;
	// Pdeathsig covers the leader until the reaper knows of it (see
	// reaper.go for why it is not the whole answer).
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{Setsid: true}, syscall.SIGKILL)
	err = cmd.Start()
	closeAll(inR, outW, errW)
	if err != nil {
		closeAll(outR, errR, inW)
		return err
	}
	m.reap.watch(cmd.Process.Pid)
	p := &hiddenProc{
		m: m, s: s, cmd: cmd, pid: cmd.Process.Pid, stdin: inW,
		wsem: make(chan struct{}, 1), stopCh: make(chan struct{}),
	}
	s.setRunner(p, p.pid)
	if !m.spawn(func() { p.wait(outR, errR) }) {
		// Close began between the caller's check and now: nothing may
		// outlive it, so reap here.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		_ = cmd.Wait()
		m.reap.forget(p.pid)
		closeAll(outR, errR, inW)
		s.finish(exitStatus(cmd.ProcessState), "the terminal manager closed")
		return nil
	}
	if sp.stdin != nil {
		data := []byte(*sp.stdin)
		p.wsem <- struct{}{}
		if !m.spawn(func() {
			defer func() { <-p.wsem }()
			_, _ = p.stdin.Write(data)
			if !sp.async {
				_ = p.stdin.Close()
			}
		}) {
			<-p.wsem
		}
	}
	return nil
}

// wait owns the process: it reaps the leader, ends what the leader left
// running in its session, drains the output and finishes the session.
func (p *hiddenProc) wait(outR, errR *os.File) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); p.copy(outR, p.s.writeOut) }()
	go func() { defer wg.Done(); p.copy(errR, p.s.writeErr) }()
	exited := make(chan struct{})
	go func() { defer wg.Done(); _ = p.cmd.Wait(); close(exited) }()

	select {
	case <-exited:
	case <-p.stopCh:
		signalSession(p.pid, syscall.SIGTERM)
		t := time.NewTimer(p.m.cfg.KillGrace)
		select {
		case <-exited:
		case <-t.C:
			signalSession(p.pid, syscall.SIGKILL)
			<-exited
		}
		t.Stop()
	}
	code := exitStatus(p.cmd.ProcessState)
	// A sync or async command is over when its leader is: background jobs
	// it left in its session would be orphans nobody can see. Most
	// commands leave none, and the cheap check says so.
	if sessionMayHaveMembers(p.pid, time.Since(p.s.started)) {
		terminateSession(context.Background(), p.pid, p.m.cfg.KillGrace, syscall.SIGTERM)
	}
	p.m.reap.forget(p.pid)
	deadline := time.Now().Add(drainTimeout)
	_ = outR.SetReadDeadline(deadline)
	_ = errR.SetReadDeadline(deadline)
	wg.Wait()
	closeAll(outR, errR, p.stdin)
	p.s.finish(code, "")
}

func (p *hiddenProc) copy(r *os.File, write func([]byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (p *hiddenProc) stop() {
	p.once.Do(func() { close(p.stopCh) })
}

func (p *hiddenProc) signal(sig syscall.Signal) error {
	if p.s.isDone() || !signalSession(p.pid, sig) {
		return errGone
	}
	return nil
}

func (p *hiddenProc) input(ctx context.Context, data []byte, eof bool) error {
	if p.stdin == nil {
		return protocol.Errorf(protocol.CodeInvalidPayload, "the command's stdin is not open for input")
	}
	select {
	case p.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.s.done:
		return errGone
	}
	defer func() { <-p.wsem }()
	stopDeadline := watchWriteDeadline(ctx, p.stdin)
	_, err := p.stdin.Write(data)
	stopDeadline()
	if err == nil && eof {
		err = p.stdin.Close()
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrClosed):
		return protocol.Errorf(protocol.CodeInvalidPayload, "the command's stdin is closed")
	case errors.Is(err, syscall.EPIPE):
		return errGone
	case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
		return ctx.Err()
	default:
		return err
	}
}

// watchWriteDeadline makes writes to f give up when ctx ends. The
// returned func must be called after the write.
func watchWriteDeadline(ctx context.Context, f *os.File) func() {
	dl, _ := ctx.Deadline()
	_ = f.SetWriteDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Now()) })
	return func() { stop() }
}

func closeAll(cs ...io.Closer) {
	for _, c := range cs {
		if f, ok := c.(*os.File); ok && f == nil {
			continue
		}
		if c != nil {
			_ = c.Close()
		}
	}
}

// mergeEnv returns base with env's variables set, replacing any of the
// same name.
func mergeEnv(base []string, env map[string]string) []string {
	if len(env) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(env))
	for _, kv := range base {
		name := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				name = kv[:i]
				break
			}
		}
		if _, ok := env[name]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
