//go:build !windows

package container

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// wrapper runs a command ($1) and notes its process group in a file
// ($2): runc makes each exec a session and group leader, so $$ is the
// group a kill must reach. When the command is done, it ends what the
// command left running in the group (TERM, as the group's leader exits
// with the command's status).
const wrapper = `echo $$ >"$2" || exit 125
/bin/sh -c "$1"
s=$?
rm -f "$2"
trap 'exit $s' TERM
kill -TERM -- -$$ 2>/dev/null || kill -TERM -$$ 2>/dev/null
exit $s`

// signaller sends signal $2 ("KILL", "INT") to the group noted in $1
// (the wrapper's file); it exits 3 when the file is not there (yet, or
// any more). (busybox's kill takes no "--".)
const signaller = `p=$(cat "$1" 2>/dev/null) && [ -n "$p" ] || exit 3
{ kill -"$2" -- -"$p" 2>/dev/null || kill -"$2" -"$p"; } && echo signalled
[ "$2" != KILL ] || rm -f "$1"`

// Exec implements sandbox.Runtime: the command runs in the workspace's
// container (created or started if need be) and is answered exactly once:
// its result, the result of a timeout or cancel (the command's process
// group killed), runtime_stopped when the container stops under it,
// runtime_unavailable when the engine stops answering.
func (r *runtime) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, req.Limit())
	defer cancel()
	workdir, env, err := r.prepare(req)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	b, err := r.acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return stoppedResult(req, start), nil
		}
		return sandbox.ExecResult{}, err
	}
	defer r.release()

	opts, pidFile := b.wrapped(req.Command, workdir, env)
	opts.AttachStdin = req.Stdin != ""
	created, err := r.cli.ContainerExecCreate(ctx, b.id, opts)
	if err != nil {
		return r.failed(ctx, b, req, start, fmt.Errorf("creating the exec: %w", err))
	}
	att, err := r.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return r.failed(ctx, b, req, start, fmt.Errorf("starting the exec: %w", err))
	}
	defer att.Close()

	out := sandbox.NewCappedBuffer(r.p.OutputCap)
	var streams sync.WaitGroup
	if req.Stdin != "" {
		streams.Add(1)
		go func() {
			defer streams.Done()
			_, _ = att.Conn.Write([]byte(req.Stdin))
			_ = att.CloseWrite()
		}()
	}
	copied := make(chan error, 1)
	streams.Add(1)
	go func() {
		defer streams.Done()
		_, err := stdcopy.StdCopy(out, out, att.Reader)
		copied <- err
	}()
	// Whatever way out, the stream is closed and its goroutines waited
	// for before the answer.
	finish := func() {
		att.Close()
		streams.Wait()
	}

	select {
	case <-copied:
	case <-ctx.Done():
		r.kill(b, pidFile, created.ID)
		// The group is dead: the stream ends with it, unless something
		// outside the group holds it (then it is cut).
		select {
		case <-copied:
		case <-time.After(2 * time.Second):
		}
		finish()
		res := stoppedResult(req, start)
		res.Output, res.Truncated = out.String(), out.Truncated()
		return res, nil
	case <-b.dead:
		finish()
		return sandbox.ExecResult{}, r.why(b)
	}
	finish()

	res := sandbox.ExecResult{
		Command: req.Command, Output: out.String(), Truncated: out.Truncated(),
		DurationMS: time.Since(start).Milliseconds(),
	}
	code, err := r.exitCode(ctx, created.ID)
	if err != nil || code > 128 {
		// A stream that ended because the container did: answered as
		// its stop, not as the command's.
		if stopped, serr := r.containerStopped(b); serr != nil || stopped {
			return sandbox.ExecResult{}, r.whyWait(b, serr)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			res := stoppedResult(req, start)
			res.Output, res.Truncated = out.String(), out.Truncated()
			return res, nil
		}
		return sandbox.ExecResult{}, r.p.engineError(err)
	}
	res.ExitCode = code
	switch {
	case code == 0:
		res.Success = true
	case code == 137 && r.oomKilled(ctx, b):
		res.OOMKilled = true
		res.Error = fmt.Sprintf("killed: the container reached its memory limit (%s)", r.opts.Memory)
	default:
		res.Error = fmt.Sprintf("exit status %d%s", code, signalName(int64(code)))
	}
	return res, nil
}

// prepare maps req's directory into the container and checks its env.
func (r *runtime) prepare(req sandbox.ExecRequest) (workdir string, env []string, err error) {
	workdir, err = r.workdir(req.Dir())
	if err != nil {
		return "", nil, err
	}
	env, err = sandbox.RequestEnv(req.Env)
	if err != nil {
		return "", nil, err
	}
	return workdir, env, nil
}

// wrapped is the exec of a command (sync or a session's) in b's
// container, under the wrapper, with its output attached; pidFile is
// where the wrapper notes its process group for a signal.
func (b *box) wrapped(command, workdir string, env []string) (opts container.ExecOptions, pidFile string) {
	var tag [8]byte
	_, _ = rand.Read(tag[:])
	pidFile = "/tmp/.tether-exec-" + hex.EncodeToString(tag[:]) + ".pid"
	return container.ExecOptions{
		User: b.user, Env: env, WorkingDir: workdir,
		Cmd:          []string{"/bin/sh", "-c", wrapper, "tether-exec", command, pidFile},
		AttachStdout: true, AttachStderr: true,
	}, pidFile
}

// stoppedResult answers a command stopped by its timeout or its call's end.
func stoppedResult(req sandbox.ExecRequest, start time.Time) sandbox.ExecResult {
	return sandbox.ExecResult{Command: req.Command, TimedOut: true, ExitCode: -1,
		DurationMS: time.Since(start).Milliseconds(), Error: sandbox.StoppedAfter(time.Since(start))}
}

// workdir maps a directory of the worktree on the host to the container.
func (r *runtime) workdir(dir string) (string, error) {
	if dir == "" {
		return Workdir, nil
	}
	rel, err := filepath.Rel(r.spec.Dir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", protocol.Errorf(protocol.CodeInvalidPath, "cwd %s is outside the worktree", dir)
	}
	return path.Join(Workdir, filepath.ToSlash(rel)), nil
}

// failed answers a command whose exec could not be made: the context's
// end, the container's stop, or the engine's error.
func (r *runtime) failed(ctx context.Context, b *box, req sandbox.ExecRequest, start time.Time, err error) (sandbox.ExecResult, error) {
	if ctx.Err() != nil {
		return stoppedResult(req, start), nil
	}
	if stopped, serr := r.containerStopped(b); serr != nil || stopped {
		return sandbox.ExecResult{}, r.whyWait(b, serr)
	}
	return sandbox.ExecResult{}, r.p.engineError(err)
}

// exitCode asks the engine for an ended exec's status; the engine may
// note the end a moment after the stream closes.
func (r *runtime) exitCode(ctx context.Context, execID string) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		info, err := r.cli.ContainerExecInspect(ctx, execID)
		if err != nil {
			return 0, fmt.Errorf("inspecting the exec: %w", err)
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return 0, fmt.Errorf("the exec's end was not noted in time: %w", ctx.Err())
		}
	}
}

// containerStopped asks the engine whether b's container still runs.
func (r *runtime) containerStopped(b *box) (bool, error) {
	select {
	case <-b.dead:
		return true, nil
	default:
	}
	if r.isStopped() {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.cli.ContainerInspect(ctx, b.id)
	if err != nil {
		return false, r.p.engineError(err)
	}
	return info.State == nil || !info.State.Running, nil
}

func (r *runtime) isStopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

// why is the reason b's container stopped, once its watcher noted it.
func (r *runtime) why(b *box) error {
	if r.isStopped() {
		return sandbox.ErrRuntimeStopped
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return b.why
}

// whyWait waits (briefly) for the watcher's reason; serr, an engine that
// stopped answering, wins.
func (r *runtime) whyWait(b *box, serr error) error {
	if serr != nil {
		return serr
	}
	if r.isStopped() {
		return sandbox.ErrRuntimeStopped
	}
	select {
	case <-b.dead:
		return r.why(b)
	case <-time.After(10 * time.Second):
		return protocol.Errorf(protocol.CodeRuntimeStopped, "the container %s stopped while the command ran", short(b.id))
	}
}

// kill ends the command's process group from a second exec, retrying
// while the command is starting (its group not noted yet) and running.
func (r *runtime) kill(b *box, pidFile, execID string) {
	_ = r.signal(b, pidFile, execID, "KILL")
}

// signal sends sig to the command's process group from a second exec,
// retrying while the command is starting (its group not noted yet). The
// signaller's word comes on its output: a detached exec's status is slow
// to ask podman for. It answers sandbox.ErrProcessDone when the command
// has ended.
func (r *runtime) signal(b *box, pidFile, execID, sig string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for delay := 5 * time.Millisecond; ctx.Err() == nil; delay = min(2*delay, 200*time.Millisecond) {
		out, err := r.run(ctx, b, signaller, pidFile, sig)
		if err != nil {
			return sandbox.ErrProcessDone // the container is gone, and the command with it
		}
		if strings.Contains(out, "signalled") {
			return nil
		}
		if info, err := r.cli.ContainerExecInspect(ctx, execID); err != nil || !info.Running {
			return sandbox.ErrProcessDone
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
	}
	return fmt.Errorf("the command's process group was not noted in time to signal it")
}

// run runs a script of tether's own in b's container and returns its
// standard output (at most 64 KiB).
func (r *runtime) run(ctx context.Context, b *box, script string, args ...string) (string, error) {
	e, err := r.cli.ContainerExecCreate(ctx, b.id, container.ExecOptions{
		User: b.user, AttachStdout: true,
		Cmd: append([]string{"/bin/sh", "-c", script, "tether"}, args...),
	})
	if err != nil {
		return "", err
	}
	att, err := r.cli.ContainerExecAttach(ctx, e.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", err
	}
	defer att.Close()
	var out strings.Builder
	_, err = stdcopy.StdCopy(&out, io.Discard, io.LimitReader(att.Reader, 1<<16))
	return out.String(), err
}

// oomKilled reports whether the container's memory cgroup counted an OOM
// kill since the last look, reading its counter from inside (cgroup v2's
// memory.events, v1's memory.oom_control).
func (r *runtime) oomKilled(ctx context.Context, b *box) bool {
	if r.memory == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	text, err := r.run(ctx, b, "cat /sys/fs/cgroup/memory.events 2>/dev/null || cat /sys/fs/cgroup/memory/memory.oom_control")
	if err != nil {
		return false
	}
	n := -1
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "oom_kill" {
			n, _ = strconv.Atoi(f[1])
		}
	}
	if n < 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := r.oomCount
	r.oomCount = n
	return n > seen
}
