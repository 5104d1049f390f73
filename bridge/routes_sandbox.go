//go:build !windows

package bridge

import (
	"context"
	"errors"
	"time"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/container"
)

// sandboxEvictInterval is how often the bridge runs sandbox eviction in
// the background.
const sandboxEvictInterval = 10 * time.Minute

func mountSandbox(r *Router, b *Bridge) {
	if b.cfg.SandboxDir == "" {
		return
	}
	cfg := sandbox.Config{Root: b.cfg.SandboxDir, Logger: b.log, Evict: sandbox.EvictPolicy{Interval: sandboxEvictInterval}}
	// The runtimes are made here, not by the Service, so capabilities can
	// say which run here without opening the Service.
	cc := b.cfg.SandboxContainer
	ctr := &container.Provider{Host: cc.Host, Image: cc.Image, AllowHostNetwork: cc.AllowHostNetwork, Idle: cc.Idle}
	cfg.Runtimes = append(sandbox.DefaultRuntimes(cfg), ctr)
	b.sbxRuntimes = cfg.Runtimes
	b.sbxClose = func() { _ = ctr.Close() }
	// Opened on first use, so a bridge that serves no sandbox call takes
	// no lock on the sandbox directory and starts no eviction loop.
	// Closing it stops the eviction loop and every sandbox command;
	// workspaces stay on disk.
	h := newLazy(func() (*sandbox.Service, error) { return sandbox.New(cfg) }, func(s *sandbox.Service) {
		if err := s.Close(); err != nil {
			cfg.Logger.Warn().Err(err).Msg("closing the sandbox")
		}
	}, errSandboxClosed)
	b.sbx = h

	Handle(r, protocol.SandboxWorkspacesEndpoint, withLazy(h, func(ctx context.Context, s *sandbox.Service, c *Call, req sandbox.AcquireRequest) (sandbox.AcquireResult, error) {
		return s.AcquireWorkspace(c.Logger().WithContext(ctx), req)
	}))
	Handle(r, protocol.SandboxListEndpoint, withLazy(h, func(_ context.Context, s *sandbox.Service, _ *Call, req sandbox.ListRequest) (sandbox.ListResult, error) {
		return s.List(req), nil
	}))
	// The workspace and its runtime's state, asked of the engine.
	sandboxRoute(r, h, protocol.SandboxWorkspacesEndpoint+"/:workspace_id", func(s *sandbox.Service, ctx context.Context, id string, _ struct{}) (sandbox.WorkspaceStatus, error) {
		return s.WorkspaceStatus(ctx, id)
	})
	Handle(r, protocol.SandboxEvictEndpoint, withLazy(h, func(ctx context.Context, s *sandbox.Service, _ *Call, req sandbox.EvictRequest) (sandbox.EvictResult, error) {
		return s.Evict(ctx, req)
	}))

	ws := protocol.SandboxWorkspacesEndpoint + "/:workspace_id/"
	// The workspace operations, served as on the root (mountWorkspace).
	op := func(endpoint string) string { return ws + protocol.WorkspaceOp(endpoint) }
	sandboxRoute(r, h, op(protocol.WorkspaceReadFileEndpoint), (*sandbox.Service).ReadFile)
	sandboxRoute(r, h, op(protocol.WorkspaceWriteFileEndpoint), (*sandbox.Service).WriteFile)
	sandboxRoute(r, h, op(protocol.WorkspaceStrReplaceEndpoint), (*sandbox.Service).StrReplace)
	sandboxRoute(r, h, op(protocol.WorkspaceListDirEndpoint), (*sandbox.Service).ListDir)
	sandboxRoute(r, h, op(protocol.WorkspaceStatEndpoint), (*sandbox.Service).Stat)
	sandboxRoute(r, h, op(protocol.WorkspaceExistsEndpoint), (*sandbox.Service).Exists)
	sandboxRoute(r, h, op(protocol.WorkspaceMkdirEndpoint), (*sandbox.Service).Mkdir)
	sandboxRoute(r, h, op(protocol.WorkspaceRmEndpoint), (*sandbox.Service).Rm)
	sandboxRoute(r, h, op(protocol.WorkspaceReaddirEndpoint), (*sandbox.Service).Readdir)
	sandboxRoute(r, h, op(protocol.WorkspaceSearchEndpoint), (*sandbox.Service).Search)
	sandboxRoute(r, h, op(protocol.WorkspaceGitDiffEndpoint), (*sandbox.Service).GitDiff)
	sandboxRoute(r, h, op(protocol.WorkspaceGitStatusEndpoint), (*sandbox.Service).GitStatus)
	sandboxRoute(r, h, ws+protocol.SandboxExecOp, (*sandbox.Service).Exec)
	// Async exec sessions, the terminal's routes under the workspace.
	sandboxRoute(r, h, ws+protocol.SandboxSessionsOp, (*sandbox.Service).Sessions)
	sess := ws + protocol.SandboxSessionsOp + "/:session_id/"
	sessionRoute(r, h, sess+protocol.SessionOutputOp, (*sandbox.Service).SessionOutput)
	sessionRoute(r, h, sess+protocol.SessionInputOp, (*sandbox.Service).SessionInput)
	sessionRoute(r, h, sess+protocol.SessionSignalOp, (*sandbox.Service).SessionSignal)
	sessionRoute(r, h, sess+protocol.SessionEndOp, (*sandbox.Service).SessionEnd)
	sandboxRoute(r, h, ws+protocol.SandboxGitCommitOp, (*sandbox.Service).GitCommit)
	sandboxRoute(r, h, ws+protocol.SandboxGitPushOp, (*sandbox.Service).GitPush)
	sandboxRoute(r, h, ws+protocol.SandboxReleaseOp, func(s *sandbox.Service, ctx context.Context, id string, _ struct{}) (protocol.OKResult, error) {
		return protocol.OKResult{WorkspaceID: id, OK: true}, s.Release(ctx, id)
	})
	sandboxRoute(r, h, ws+protocol.SandboxDestroyOp, func(s *sandbox.Service, ctx context.Context, id string, _ struct{}) (protocol.OKResult, error) {
		return protocol.OKResult{WorkspaceID: id, OK: true}, s.Destroy(ctx, id)
	})
}

var errSandboxClosed = errors.New("the sandbox is closed")

// sandboxRoute mounts a per-workspace route: fn gets the workspace id
// from the path.
func sandboxRoute[Req, Resp any](r *Router, h *lazy[*sandbox.Service], path string, fn func(*sandbox.Service, context.Context, string, Req) (Resp, error)) {
	Handle(r, path, withLazy(h, func(ctx context.Context, s *sandbox.Service, c *Call, req Req) (Resp, error) {
		// The call's logger rides in ctx, so sandbox events carry its
		// correlation_id, endpoint and workspace_id.
		return fn(s, c.Logger().WithContext(ctx), c.Param("workspace_id"), req)
	}))
}

// sessionRoute mounts a route of one session of a workspace: fn gets the
// workspace and session ids from the path.
func sessionRoute[Req, Resp any](r *Router, h *lazy[*sandbox.Service], path string, fn func(*sandbox.Service, context.Context, string, string, Req) (Resp, error)) {
	Handle(r, path, withLazy(h, func(ctx context.Context, s *sandbox.Service, c *Call, req Req) (Resp, error) {
		return fn(s, c.Logger().WithContext(ctx), c.Param("workspace_id"), c.Param("session_id"), req)
	}))
}

// SandboxContainerConfig configures the sandbox's container runtime; see
// container.Provider for each field.
type SandboxContainerConfig struct {
	// Host is the engine's address (tether bridge --container-host);
	// default DOCKER_HOST, else unix:///var/run/docker.sock.
	Host string
	// Image is the image of a workspace that names none
	// (--container-image).
	Image string
	// AllowHostNetwork lets a workspace ask for network "host"
	// (--container-allow-host-network).
	AllowHostNetwork bool
	// Idle stops a container after this long without commands
	// (--container-idle); default 10m.
	Idle time.Duration
}
