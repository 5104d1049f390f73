//go:build !windows

package sandbox

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Bwrap runs commands inside bubblewrap: the host's root read-only, the
// sandbox root hidden except the worktree (read-write) and its repo cache
// (read-only), a private /tmp and /dev, its own PID namespace, no network
// when the network is "none", and every process killed with tether.
// Where bwrap cannot run (no binary, no user namespaces) Start answers
// runtime_unavailable; it never falls back to the host.
type Bwrap struct {
	// Bin is the bwrap binary; default "bwrap" from PATH.
	Bin string
	// OutputCap bounds a result's output; default DefaultOutputCap.
	OutputCap int

	once   sync.Once
	probe  error
	binAbs string
}

var _ RuntimeProvider = (*Bwrap)(nil)

// Name implements RuntimeProvider.
func (*Bwrap) Name() string { return "bwrap" }

// Available reports whether bwrap can create its namespaces here; the
// answer is measured once.
func (b *Bwrap) Available() error {
	b.once.Do(func() {
		if b.probe = bwrapOn(runtime.GOOS); b.probe != nil {
			return
		}
		bin := b.Bin
		if bin == "" {
			bin = "bwrap"
		}
		abs, err := exec.LookPath(bin)
		if err != nil {
			b.probe = protocol.Errorf(protocol.CodeRuntimeUnavailable, "bwrap is not installed here (%v)", err)
			return
		}
		b.binAbs = abs
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, abs, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--unshare-net", "--unshare-pid", "--die-with-parent", "--", "/bin/true")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			b.probe = protocol.Errorf(protocol.CodeRuntimeUnavailable, "bwrap cannot create a sandbox here: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
	})
	return b.probe
}

// Start implements RuntimeProvider.
func (b *Bwrap) Start(_ context.Context, spec RuntimeSpec) (Runtime, error) {
	if err := b.Available(); err != nil {
		return nil, err
	}
	return &bwrapRuntime{bin: b.binAbs, spec: spec, procRunner: procRunner{outputCap: b.OutputCap}}, nil
}

type bwrapRuntime struct {
	procRunner
	bin  string
	spec RuntimeSpec
}

func (r *bwrapRuntime) Capabilities() Capabilities {
	return Capabilities{Writable: true, Isolated: true, Network: r.spec.Network != NetworkNone}
}

func (r *bwrapRuntime) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	env, err := commandEnv("/tmp", req.Env)
	if err != nil {
		return ExecResult{}, err
	}
	return r.run(ctx, r.argv(req), r.spec.Dir, env, req)
}

// Start implements Runtime. A signal reaches bwrap, outside the sandbox's
// PID namespace: KILL, TERM, INT and HUP end it, and with it (its
// --die-with-parent) everything inside; a signal the command would catch
// is not passed on.
func (r *bwrapRuntime) Start(_ context.Context, req ExecRequest, out io.Writer) (Process, error) {
	env, err := commandEnv("/tmp", req.Env)
	if err != nil {
		return nil, err
	}
	return r.start(r.argv(req), r.spec.Dir, env, out, req.TTY)
}

// argv is the bwrap command line that runs req.
func (r *bwrapRuntime) argv(req ExecRequest) []string {
	argv := []string{r.bin,
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
	}
	for _, h := range r.spec.Hide {
		argv = append(argv, "--tmpfs", h)
	}
	for _, ro := range r.spec.ReadOnly {
		argv = append(argv, "--ro-bind", ro, ro)
	}
	argv = append(argv, "--bind", r.spec.Dir, r.spec.Dir,
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session")
	if r.spec.Network == NetworkNone {
		argv = append(argv, "--unshare-net")
	}
	return append(argv, "--chdir", req.dir, "--", "/bin/sh", "-c", req.Command)
}

func (r *bwrapRuntime) Stop() { r.stop() }
