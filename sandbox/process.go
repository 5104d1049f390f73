//go:build !windows

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/tetherdev/tether/internal/proctree"
)

// ErrProcessDone answers Process.Signal and Process.Input once the
// command has ended.
var ErrProcessDone = errors.New("the command has ended")

// start starts argv in its own process group, as run does, with a pipe
// for stdin: a host Process (subprocess and bwrap).
func (p *procRunner) start(argv []string, dir string, env []string, out io.Writer, tty bool) (Process, error) {
	if tty {
		return p.startPTY(argv, dir, env, out)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("making the command's stdin: %w", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, out, out
	cmd.WaitDelay = 2 * time.Second

	pgid, err := p.startGroup(cmd)
	inR.Close() // the child has its own copy
	if err != nil {
		inW.Close()
		return nil, err
	}
	return &hostProcess{p: p, cmd: cmd, pgid: pgid, stdin: inW, done: make(chan struct{})}, nil
}

// ptySize is a tty session's terminal.
var ptySize = pty.Winsize{Rows: 24, Cols: 80}

// startPTY starts argv as the leader of a session of its own whose
// controlling terminal is a new pty; out gets what the pty shows.
func (p *procRunner) startPTY(argv []string, dir string, env []string, out io.Writer) (Process, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("opening a pty: %w", err)
	}
	_ = pty.Setsize(ptmx, &ptySize)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, append(env, "TERM=xterm")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}

	pgid, err := p.startGroup(cmd)
	tty.Close() // the child has its own copy
	if err != nil {
		ptmx.Close()
		return nil, err
	}
	h := &hostProcess{p: p, cmd: cmd, pgid: pgid, stdin: ptmx, pty: true, done: make(chan struct{}), copied: make(chan struct{})}
	go func() {
		defer close(h.copied)
		// Ends with EIO once no process holds the terminal any more.
		_, _ = io.Copy(out, ptmx)
	}()
	return h, nil
}

// hostProcess is a command started on the host, the leader of its own
// process group.
type hostProcess struct {
	p     *procRunner
	cmd   *exec.Cmd
	pgid  int
	stdin *os.File      // a pipe, or the pty's master
	done  chan struct{} // closed when Wait has reaped the command
	// pty: stdin is the master of the command's terminal, whose output
	// copied (closed at its end) reads.
	pty    bool
	copied chan struct{}
}

func (h *hostProcess) Input(ctx context.Context, data []byte, eof bool) error {
	select {
	case <-h.done:
		return ErrProcessDone
	default:
	}
	if err := WriteInput(ctx, h.stdin, data); err != nil {
		return err
	}
	if eof && h.pty {
		return WriteInput(ctx, h.stdin, EOT)
	}
	if eof {
		if err := h.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			return inputError(ctx, err)
		}
	}
	return nil
}

// EOT is what ends a terminal's input: a terminal has no end of input but
// the one its line discipline makes of Ctrl-D.
var EOT = []byte{4}

// WriteInput writes data to a command's stdin, w: a write to a command
// that does not read waits, until ctx ends. The past deadline that ends
// such a wait is cleared first, so an input that gave up does not fail the
// next one. Its error is inputError's. Every runtime's session input
// writes through it.
func WriteInput(ctx context.Context, w interface {
	io.Writer
	SetWriteDeadline(time.Time) error
}, data []byte) error {
	_ = w.SetWriteDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = w.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := w.Write(data); err != nil {
		return inputError(ctx, err)
	}
	return nil
}

// inputError is the answer to a failed write to a command's stdin.
func inputError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, syscall.EPIPE), errors.Is(err, os.ErrClosed), errors.Is(err, net.ErrClosed):
		return ErrProcessDone
	case ctx.Err() != nil:
		return fmt.Errorf("the command did not read its input in time: %w", ctx.Err())
	}
	return fmt.Errorf("writing the command's input: %w", err)
}

func (h *hostProcess) Signal(sig syscall.Signal) error {
	select {
	case <-h.done:
		return ErrProcessDone
	default:
	}
	if err := syscall.Kill(-h.pgid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return ErrProcessDone
		}
		return fmt.Errorf("signalling the command: %w", err)
	}
	return nil
}

func (h *hostProcess) Wait() (int, error) {
	err := h.cmd.Wait()
	close(h.done)
	stopped := h.p.endGroup(h.pgid)
	if h.pty {
		// The terminal's last output, unless something outside the group
		// still holds it (then it is cut).
		select {
		case <-h.copied:
		case <-time.After(2 * time.Second):
			h.stdin.Close()
			select {
			case <-h.copied:
			case <-time.After(time.Second):
			}
		}
	}
	h.stdin.Close()
	if stopped {
		return -1, ErrRuntimeStopped
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && h.cmd.ProcessState == nil {
		return -1, fmt.Errorf("waiting for the command: %w", err)
	}
	return proctree.ExitStatus(h.cmd.ProcessState), nil
}
