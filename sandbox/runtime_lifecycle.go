//go:build !windows

package sandbox

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// The lifecycle of a workspace's runtime: chosen at acquire, started on
// first use (an acquire or an exec after a release), replaced when the
// record asks for another kind, stopped by Release, Destroy and Close.
// The runtimes themselves are in runtime*.go.

// RuntimeContainer names the container runtime (package
// sandbox/container), the one kind that takes ContainerOptions.
const RuntimeContainer = "container"

// runtimeChoice settles an acquire's runtime, network and options: the
// bridge's defaults for what it leaves out (OptionDefaulter), and a
// refusal of a runtime this bridge has not, or of options another runtime
// does not take. opts comes back nil for any runtime but container.
func (s *Service) runtimeChoice(kind, network string, opts *ContainerOptions) (string, string, *ContainerOptions, error) {
	if kind == "" {
		kind = s.cfg.DefaultRuntime
	}
	if _, ok := s.runtimes[kind]; !ok {
		names := make([]string, 0, len(s.runtimes))
		for n := range s.runtimes {
			names = append(names, n)
		}
		slices.Sort(names)
		return "", "", nil, protocol.Errorf(protocol.CodeInvalidPayload, "runtime %q: use %s", kind, strings.Join(names, ", "))
	}
	if opts != nil && kind != RuntimeContainer {
		return "", "", nil, protocol.Errorf(protocol.CodeInvalidPayload, "container: options of runtime container, and the runtime is %q", kind)
	}
	if d, ok := s.runtimes[kind].(OptionDefaulter); ok {
		var o ContainerOptions
		if opts != nil {
			o = *opts
		}
		o = d.DefaultOptions(o)
		opts = &o
	}
	if network == "" {
		network = NetworkHost
		if kind == "bwrap" || kind == RuntimeContainer {
			network = NetworkNone
		}
	}
	return kind, network, opts, nil
}

func (s *Service) spec(rec *Record) RuntimeSpec {
	spec := RuntimeSpec{
		Dir: rec.Dir, Network: rec.Network,
		Hide:     []string{s.root},
		ReadOnly: []string{s.cache.Dir(rec.Repo)},
		Name:     "tether-" + s.scope + "-" + rec.ID,
		Analysis: rec.Mode == ModeAnalysis,
	}
	if rec.Container != nil {
		spec.Container = *rec.Container
	}
	return spec
}

// runtimeKey says what a live runtime was started for: when the record
// asks for something else, the runtime is replaced.
func runtimeKey(rec *Record) string {
	opts, _ := json.Marshal(rec.Container)
	return rec.Runtime + "\x00" + rec.Network + "\x00" + string(opts)
}

// checkRuntime answers what starting the runtime of spec would (unavailable,
// refused options) without keeping it.
func (s *Service) checkRuntime(ctx context.Context, kind string, spec RuntimeSpec) error {
	rt, err := s.runtimes[kind].Start(ctx, spec)
	if err != nil {
		return err
	}
	rt.Stop()
	return nil
}

// ensureRuntime returns the capabilities of the workspace's runtime,
// starting it or replacing it if the record asks for another one.
func (s *Service) ensureRuntime(ctx context.Context, rec *Record) (Capabilities, error) {
	rt, err := s.runtime(ctx, rec)
	if err != nil {
		return Capabilities{}, err
	}
	return rt.Capabilities(), nil
}

func (s *Service) runtime(ctx context.Context, rec *Record) (Runtime, error) {
	now := s.cfg.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	key := runtimeKey(rec)
	l, ok := s.live[rec.ID]
	if ok && l.key == key {
		l.used = now
		s.live[rec.ID] = l
		s.mu.Unlock()
		return l.rt, nil
	}
	s.mu.Unlock()
	if ok {
		l.rt.Stop() // replaced by another kind
	}
	p, found := s.runtimes[rec.Runtime]
	if !found {
		return nil, protocol.Errorf(protocol.CodeRuntimeUnavailable, "runtime %q is not offered here", rec.Runtime)
	}
	rt, err := p.Start(ctx, s.spec(rec))
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		// Close stopped the live runtimes while this one started.
		s.mu.Unlock()
		rt.Stop()
		return nil, ErrClosed
	}
	if old, ok := s.live[rec.ID]; ok && old.rt != l.rt {
		old.rt.Stop()
	}
	s.live[rec.ID] = liveRuntime{rt: rt, key: key, used: now}
	s.mu.Unlock()
	return rt, nil
}

// tracerName names the sandbox's spans' instrumentation scope.
const tracerName = "github.com/tetherdev/tether/sandbox"

// Exec runs a command in the workspace's runtime, starting the runtime
// if it was released. When tracing is on, the command is a "sandbox.exec"
// span under the call's (runtime, exit code, duration; not the command).
//
// With Mode "async" the command starts as a session (sessions.go) and
// the answer is its session_id.
func (s *Service) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	if req.Command == "" {
		return ExecResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "command is required")
	}
	if req.Mode != "" && req.Mode != ExecSync && req.Mode != ExecAsync {
		return ExecResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "mode %q: use %q or %q", req.Mode, ExecSync, ExecAsync)
	}
	if req.TTY && req.Mode != ExecAsync {
		return ExecResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "tty: only with mode %q (an interactive command is a session)", ExecAsync)
	}
	if req.Timeout < 0 {
		return ExecResult{}, protocol.Errorf(protocol.CodeInvalidPayload, "timeout %v: must not be negative", req.Timeout)
	}
	var res ExecResult
	err := s.withWorkspace(ctx, id, writing, func(rec *Record) error {
		root, rel, err := s.tree(rec).open(req.Cwd, reading)
		if err != nil {
			return err
		}
		fi, err := root.Stat(rel)
		root.Close()
		if err != nil {
			return pathError("cwd", rel, err)
		}
		if !fi.IsDir() {
			return protocol.Errorf(protocol.CodeInvalidPath, "cwd %s is not a directory", rel)
		}
		req.dir = filepath.Join(rec.Dir, filepath.FromSlash(rel))
		rt, err := s.runtime(ctx, rec)
		if err != nil {
			return err
		}
		if req.Mode == ExecAsync {
			res, err = s.startSession(ctx, rec, rt, req, rel)
			return err
		}
		start := time.Now()
		span := tracing.StartExec(ctx, tracerName, "sandbox.exec", start,
			tracing.AttrExecRuntime.String(rec.Runtime))
		res, err = rt.Exec(ctx, req)
		tracing.EndExec(span, time.Now(), tracing.Exit{Code: res.ExitCode, TimedOut: res.TimedOut,
			Duration: time.Since(start), Failed: err != nil})
		s.mu.Lock()
		if l, ok := s.live[id]; ok && l.rt == rt {
			l.used = s.cfg.Now() // a long command is use until its end
			s.live[id] = l
		}
		s.mu.Unlock()
		return err
	})
	return res, err
}

// Release stops the workspace's runtime, and so its async sessions; the
// workspace stays as it is.
func (s *Service) Release(ctx context.Context, id string) error {
	if _, err := s.workspace(id); err != nil {
		return err
	}
	s.stopRuntime(id)
	s.logger(ctx).Info().Str("sandbox_workspace", id).Msg("sandbox runtime released")
	return s.store.Flush()
}

func (s *Service) stopRuntime(id string) bool {
	s.mu.Lock()
	l, ok := s.live[id]
	delete(s.live, id)
	s.mu.Unlock()
	if ok {
		l.rt.Stop()
	}
	s.awaitSessions(id)
	return ok
}

// WorkspaceStatus returns the workspace's record and its runtime's state,
// asked each time of what runs it (see RuntimeStater).
func (s *Service) WorkspaceStatus(ctx context.Context, id string) (WorkspaceStatus, error) {
	rec, err := s.workspace(id)
	if err != nil {
		return WorkspaceStatus{}, err
	}
	st := WorkspaceStatus{
		WorkspaceID: rec.ID, Mode: rec.Mode, Branch: rec.Branch, BaseRef: rec.BaseRef, BaseCommit: rec.BaseCommit,
		Runtime: rec.Runtime, Network: rec.Network, Container: rec.Container, Path: rec.Dir, Pinned: rec.Pinned,
		RuntimeState: RuntimeMissing,
	}
	if rs, ok := s.runtimes[rec.Runtime].(RuntimeStater); ok {
		st.RuntimeState, st.RuntimeDetail, err = rs.State(ctx, s.spec(rec))
		return st, err
	}
	s.mu.Lock()
	if _, live := s.live[id]; live {
		st.RuntimeState = RuntimeRunning
	}
	s.mu.Unlock()
	return st, nil
}
