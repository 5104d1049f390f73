//go:build !windows

package container

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/sandbox"
)

// Start implements sandbox.Runtime: the command runs in the workspace's
// container under the same wrapper as Exec's, with its stdin attached
// (the exec's hijacked connection). Its process group takes signals from
// a second exec, as a cancel's KILL does. The container counts the
// command as running (no idle stop) until Wait returns; a container that
// dies ends it with runtime_stopped and the container's exit status.
func (r *runtime) Start(ctx context.Context, req sandbox.ExecRequest, out io.Writer) (sandbox.Process, error) {
	workdir, env, err := r.prepare(req)
	if err != nil {
		return nil, err
	}
	b, err := r.acquire(ctx)
	if err != nil {
		return nil, err
	}
	opts, pidFile := b.wrapped(req.Command, workdir, env)
	opts.AttachStdin, opts.Tty, opts.ConsoleSize = true, req.TTY, &consoleSize
	created, err := r.cli.ContainerExecCreate(ctx, b.id, opts)
	if err == nil {
		var att types.HijackedResponse
		// The stream outlives the call that starts it.
		att, err = r.cli.ContainerExecAttach(context.WithoutCancel(ctx), created.ID, container.ExecAttachOptions{Tty: req.TTY, ConsoleSize: &consoleSize})
		if err == nil {
			p := &process{r: r, b: b, execID: created.ID, pidFile: pidFile, att: att, tty: req.TTY, copied: make(chan struct{})}
			go func() {
				defer close(p.copied)
				if req.TTY {
					_, _ = io.Copy(out, att.Reader) // a terminal's stream is not multiplexed
					return
				}
				_, _ = stdcopy.StdCopy(out, out, att.Reader)
			}()
			return p, nil
		}
	}
	defer r.release()
	if stopped, serr := r.containerStopped(b); serr != nil || stopped {
		return nil, r.whyWait(b, serr)
	}
	return nil, r.p.engineError(fmt.Errorf("starting the exec: %w", err))
}

// consoleSize is a tty exec's terminal: rows, columns (the host's pty's).
var consoleSize = [2]uint{24, 80}

// process is a command started in the container.
type process struct {
	r       *runtime
	b       *box
	execID  string
	pidFile string
	att     types.HijackedResponse
	copied  chan struct{} // closed when the output stream ended
	tty     bool          // the exec has a terminal: eof is Ctrl-D

	inMu   sync.Mutex // one input at a time
	closed bool       // stdin closed
}

func (p *process) ended() bool {
	select {
	case <-p.copied:
		return true
	default:
		return false
	}
}

// input writes data to the exec's stdin; a write that fails because the
// command ended is ErrProcessDone, however the connection broke.
func (p *process) input(ctx context.Context, data []byte) error {
	err := sandbox.WriteInput(ctx, p.att.Conn, data)
	if err != nil && ctx.Err() == nil && p.ended() {
		return sandbox.ErrProcessDone
	}
	return err
}

func (p *process) Input(ctx context.Context, data []byte, eof bool) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.ended() || p.closed {
		return sandbox.ErrProcessDone
	}
	if err := p.input(ctx, data); err != nil {
		return err
	}
	if eof && p.tty {
		return p.input(ctx, sandbox.EOT)
	}
	if eof {
		p.closed = true
		if err := p.att.CloseWrite(); err != nil && !p.ended() {
			return fmt.Errorf("closing the command's input: %w", err)
		}
	}
	return nil
}

func (p *process) Signal(sig syscall.Signal) error {
	if p.ended() {
		return sandbox.ErrProcessDone
	}
	name := unix.SignalName(sig)
	if len(name) > 3 {
		name = name[3:] // busybox's kill takes "INT", not "SIGINT"
	}
	return p.r.signal(p.b, p.pidFile, p.execID, name)
}

// Wait waits for the stream's end, or the container's, and answers the
// command's exit status, or why the container stopped under it.
func (p *process) Wait() (int, error) {
	defer p.r.release()
	select {
	case <-p.copied:
	case <-p.b.dead:
		p.att.Close()
		<-p.copied
		return -1, p.r.why(p.b)
	}
	p.att.Close()
	code, err := p.r.exitCode(context.Background(), p.execID)
	if err == nil && code > 128 {
		// A wrapper ended by a signal did not end what the command left
		// in its group (background jobs ignore INT): the session's end
		// does, as on the host. A wrapper that exited (any status up to
		// 128) ended its group and removed its file itself.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = p.r.run(ctx, p.b, signaller, p.pidFile, "KILL")
		cancel()
	}
	if err != nil || code > 128 {
		// A stream that ended because the container did: its stop.
		if stopped, serr := p.r.containerStopped(p.b); serr != nil || stopped {
			return -1, p.r.whyWait(p.b, serr)
		}
	}
	if err != nil {
		return -1, p.r.p.engineError(err)
	}
	return code, nil
}
