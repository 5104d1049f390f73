//go:build !windows

package container

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// Workdir is where the worktree is mounted in the container.
const Workdir = "/workspace"

// keeper is the container's main process: it does nothing, holds no
// file open, and ends at once on SIGTERM (as PID 1, a shell ignores
// signals it does not trap).
const keeper = `trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done`

// runtime is one workspace's container. Exec, Stop and the idle timer
// may run concurrently: they take turns on gate for whatever creates,
// starts, stops or removes the container; mu guards the fields and is
// never held across a call to the engine.
type runtime struct {
	p      *Provider
	cli    *client.Client
	spec   sandbox.RuntimeSpec
	opts   sandbox.ContainerOptions // Image filled in
	memory int64

	gate      chan struct{} // one lifecycle change at a time
	watchCtx  context.Context
	stopWatch context.CancelFunc
	watchers  sync.WaitGroup

	mu       sync.Mutex
	box      *box // the current container; nil before the first command and after a removal
	running  int  // commands in flight
	idle     *time.Timer
	stopped  bool
	oomCount int // the container's OOM kills seen so far
}

// box is one container and what became of it.
type box struct {
	id   string
	user string
	// dead is closed when the container stopped running, or when Stop
	// began to remove it; why says how.
	dead chan struct{}
	why  error
	// idled: tether stopped it for want of commands; the next command
	// starts it again. Otherwise a stop is a crash, and the next command
	// gets a fresh container.
	idled bool
}

func (r *runtime) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Writable: !r.spec.Analysis, Isolated: true, Network: r.spec.Network == sandbox.NetworkHost}
}

// lock takes the lifecycle gate, or gives up when ctx ends.
func (r *runtime) lock(ctx context.Context) error {
	select {
	case r.gate <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *runtime) unlock() { <-r.gate }

// acquire returns a running container for a command and counts the
// command in; release counts it out.
func (r *runtime) acquire(ctx context.Context) (*box, error) {
	if err := r.lock(ctx); err != nil {
		return nil, err
	}
	defer r.unlock()
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return nil, sandbox.ErrRuntimeStopped
	}
	b := r.box
	r.mu.Unlock()
	b, err := r.ensure(ctx, b)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.running++
	if r.idle != nil {
		r.idle.Stop()
	}
	r.mu.Unlock()
	return b, nil
}

func (r *runtime) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running--
	if r.running > 0 || r.stopped || r.p.Idle < 0 {
		return
	}
	idle := r.p.Idle
	if idle == 0 {
		idle = DefaultIdle
	}
	if r.idle == nil {
		r.idle = time.AfterFunc(idle, r.idleStop)
	} else {
		r.idle.Reset(idle)
	}
}

// ensure returns b when it is running; starts it again when tether
// stopped it for idleness; otherwise (none yet, crashed, gone) removes
// what is left and creates a fresh container. Called with the gate held.
func (r *runtime) ensure(ctx context.Context, b *box) (*box, error) {
	if b != nil {
		select {
		case <-b.dead:
			if b.idled {
				if err := r.cli.ContainerStart(ctx, b.id, container.StartOptions{}); err == nil {
					nb := &box{id: b.id, user: b.user, dead: make(chan struct{})}
					r.watch(nb)
					r.setBox(nb)
					return nb, nil
				}
			}
		default:
			return b, nil
		}
	}
	// A container of this name left by a crash, a removal that failed, or
	// an earlier process of this bridge: removed, so the command starts
	// clean.
	if err := r.cli.ContainerRemove(ctx, r.spec.Name, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return nil, r.p.engineError(fmt.Errorf("removing the old container %s: %w", r.spec.Name, err))
	}
	r.setBox(nil)
	user, err := r.user()
	if err != nil {
		return nil, err
	}
	cfg, host := r.config(user)
	created, err := r.cli.ContainerCreate(ctx, cfg, host, nil, nil, r.spec.Name)
	if err != nil {
		return nil, r.p.engineError(fmt.Errorf("creating the container: %w", err))
	}
	nb := &box{id: created.ID, user: user, dead: make(chan struct{})}
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		rmCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = r.cli.ContainerRemove(rmCtx, created.ID, container.RemoveOptions{Force: true})
		cancel()
		return nil, r.p.engineError(fmt.Errorf("starting the container: %w", err))
	}
	r.watch(nb)
	r.setBox(nb)
	return nb, nil
}

// setBox makes b the current container; a started container has a new
// cgroup, whose OOM count starts at 0.
func (r *runtime) setBox(b *box) {
	r.mu.Lock()
	r.box = b
	r.oomCount = 0
	r.mu.Unlock()
}

// user is the uid:gid commands run as: the options', else the worktree
// owner's.
func (r *runtime) user() (string, error) {
	if r.opts.User != "" {
		return r.opts.User, nil
	}
	fi, err := os.Stat(r.spec.Dir)
	if err != nil {
		return "", fmt.Errorf("finding the worktree's owner: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", protocol.Errorf(protocol.CodeRuntimeUnavailable, "cannot tell the worktree's owner here; give container.user")
	}
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid), nil
}

// config is the container's configuration: see the package doc.
func (r *runtime) config(user string) (*container.Config, *container.HostConfig) {
	env := make([]string, 0, len(r.opts.Env)+2)
	env = append(env, "HOME=/tmp", "GIT_TERMINAL_PROMPT=0")
	for k, v := range r.opts.Env {
		env = append(env, k+"="+v)
	}
	cfg := &container.Config{
		Image:      r.opts.Image,
		Entrypoint: []string{"/bin/sh", "-c", keeper},
		Cmd:        []string{},
		User:       user,
		Env:        env,
		WorkingDir: Workdir,
		Labels:     map[string]string{"dev.tether.sandbox": r.spec.Name},
		StopSignal: "SIGTERM",
	}
	mounts := []mount.Mount{{Type: mount.TypeBind, Source: r.spec.Dir, Target: Workdir, ReadOnly: r.spec.Analysis}}
	for _, ro := range r.spec.ReadOnly {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: ro, Target: ro, ReadOnly: true})
	}
	network := "none"
	if r.spec.Network == sandbox.NetworkHost {
		network = "host"
	}
	host := &container.HostConfig{
		NetworkMode:   container.NetworkMode(network),
		Mounts:        mounts,
		Tmpfs:         map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777"},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		SecurityOpt:   []string{"no-new-privileges"},
		CapDrop:       []string{"ALL"},
	}
	if r.opts.CPUs > 0 {
		host.NanoCPUs = int64(r.opts.CPUs * 1e9)
	}
	if r.memory > 0 {
		host.Memory, host.MemorySwap = r.memory, r.memory // no swap past the limit
	}
	if r.opts.Pids > 0 {
		pids := r.opts.Pids
		host.PidsLimit = &pids
	}
	return cfg, host
}

// watch waits, in the background, for b's container to stop, or for
// Stop, and notes why in b before closing b.dead: the exit status and
// last log lines, the engine's error, or the release. A command in b
// waits for b.dead and nothing else of the runtime's.
func (r *runtime) watch(b *box) {
	r.watchers.Add(1)
	go func() {
		defer r.watchers.Done()
		okC, errC := r.cli.ContainerWait(r.watchCtx, b.id, container.WaitConditionNotRunning)
		var why error
		select {
		case w := <-okC:
			why = r.stopReason(b.id, w.StatusCode)
		case err := <-errC:
			switch {
			case r.watchCtx.Err() != nil:
				// Stop: the container is being removed, and what runs in
				// it is answered now, whatever the engine does.
				why = sandbox.ErrRuntimeStopped
			case cerrdefs.IsNotFound(err):
				why = protocol.Errorf(protocol.CodeRuntimeStopped, "the container %s was removed while the command ran", short(b.id))
			default:
				// The wait is a long request: its end without an answer is
				// the engine's (a restart, a crash).
				why = protocol.Errorf(protocol.CodeRuntimeUnavailable, "the container engine at %s stopped answering while the command ran: %v", r.p.host(), err)
			}
		}
		r.mu.Lock()
		b.why = why
		r.mu.Unlock()
		close(b.dead)
	}()
}

// stopReason is runtime_stopped with the container's exit status and
// its last log lines.
func (r *runtime) stopReason(id string, code int64) error {
	ctx, cancel := context.WithTimeout(r.watchCtx, 5*time.Second)
	defer cancel()
	msg := fmt.Sprintf("the container %s stopped (exit status %d%s)", short(id), code, signalName(code))
	if info, err := r.cli.ContainerInspect(ctx, id); err == nil && info.State != nil && info.State.OOMKilled {
		msg += ", out of memory"
	}
	if rc, err := r.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"}); err == nil {
		out := sandbox.NewCappedBuffer(4096)
		_, _ = stdcopy.StdCopy(out, out, io.LimitReader(rc, 1<<20))
		rc.Close()
		if s := strings.TrimSpace(out.String()); s != "" {
			msg += "; its last log lines:\n" + s
		}
	}
	return protocol.Errorf(protocol.CodeRuntimeStopped, "%s", msg)
}

func signalName(code int64) string {
	if code > 128 && code < 128+65 {
		return ", killed by " + unix.SignalName(syscall.Signal(code-128))
	}
	return ""
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// idleStop stops the container after Provider.Idle without commands; the
// next command starts it again.
func (r *runtime) idleStop() {
	ctx, cancel := context.WithTimeout(r.watchCtx, 30*time.Second)
	defer cancel()
	if r.lock(ctx) != nil {
		return
	}
	defer r.unlock()
	r.mu.Lock()
	b := r.box
	if r.running > 0 || r.stopped || b == nil {
		r.mu.Unlock()
		return
	}
	select {
	case <-b.dead:
		r.mu.Unlock()
		return
	default:
	}
	b.idled = true
	r.mu.Unlock()
	timeout := 5
	if err := r.cli.ContainerStop(ctx, b.id, container.StopOptions{Timeout: &timeout}); err != nil {
		r.mu.Lock()
		b.idled = false
		r.mu.Unlock()
		return
	}
	// Wait for the watcher, so the next command sees it stopped.
	select {
	case <-b.dead:
	case <-ctx.Done():
	}
}

// Stop removes the container, ending every command in it, and waits for
// its watcher. The workspace's files are untouched.
func (r *runtime) Stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	if r.idle != nil {
		r.idle.Stop()
	}
	r.mu.Unlock()
	r.stopWatch()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.lock(ctx) == nil {
		defer r.unlock()
	}
	r.mu.Lock()
	b := r.box
	r.box = nil
	r.mu.Unlock()
	if b != nil {
		_ = r.cli.ContainerRemove(ctx, b.id, container.RemoveOptions{Force: true})
	}
	r.watchers.Wait()
}
