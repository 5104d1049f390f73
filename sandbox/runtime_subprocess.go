//go:build !windows

package sandbox

import (
	"context"
	"io"
	"os"

	"github.com/tetherdev/tether/protocol"
)

// Subprocess runs commands as plain host processes in the worktree: a
// cleared environment (an allow-list), their own process group, a timeout
// and an output cap. It isolates nothing and says so: a request for
// network "none" answers runtime_unavailable.
type Subprocess struct {
	// OutputCap bounds a result's output; default DefaultOutputCap.
	OutputCap int
}

var _ RuntimeProvider = (*Subprocess)(nil)

// Name implements RuntimeProvider.
func (*Subprocess) Name() string { return "subprocess" }

// Start implements RuntimeProvider.
func (s *Subprocess) Start(_ context.Context, spec RuntimeSpec) (Runtime, error) {
	if spec.Network == NetworkNone {
		return nil, protocol.Errorf(protocol.CodeRuntimeUnavailable, "the subprocess runtime cannot cut the network; ask for runtime bwrap")
	}
	home, _ := os.UserHomeDir()
	if home == "" {
		home = spec.Dir
	}
	return &subprocessRuntime{spec: spec, home: home, procRunner: procRunner{outputCap: s.OutputCap}}, nil
}

type subprocessRuntime struct {
	procRunner
	spec RuntimeSpec
	home string
}

func (r *subprocessRuntime) Capabilities() Capabilities {
	return Capabilities{Writable: true, Isolated: false, Network: true}
}

func (r *subprocessRuntime) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	env, err := commandEnv(r.home, req.Env)
	if err != nil {
		return ExecResult{}, err
	}
	return r.run(ctx, []string{"/bin/sh", "-c", req.Command}, req.dir, env, req)
}

func (r *subprocessRuntime) Start(_ context.Context, req ExecRequest, out io.Writer) (Process, error) {
	env, err := commandEnv(r.home, req.Env)
	if err != nil {
		return nil, err
	}
	return r.start([]string{"/bin/sh", "-c", req.Command}, req.dir, env, out, req.TTY)
}

func (r *subprocessRuntime) Stop() { r.stop() }
