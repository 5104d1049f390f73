//go:build !windows

// Package container is the sandbox's container runtime ("container"): the
// commands of a workspace run in one container of an engine that speaks
// the Docker Engine API on a unix socket (dockerd, or podman system
// service), through the official Go client.
//
// # What a container gets
//
// The image the workspace asks for (or the bridge's default), which must
// be on the engine already: nothing is pulled. The worktree bind-mounted at
// /workspace (read-only for an analysis workspace), the repo cache its git
// reads mounted read-only at the path git expects, a private /tmp, nothing
// else of the sandbox root. No network unless the workspace asks for
// "host" and the bridge allows it. The CPU, memory (no swap beyond it) and
// process limits of its options. Every process runs as the worktree
// owner's uid:gid (or the options' user), so files written inside belong
// to the host user; none runs as root.
//
// # Lifecycle
//
// The container is created on a workspace's first command and shared by
// the ones after it; it is stopped after Provider.Idle without commands
// (and started again by the next), removed when the workspace is released,
// evicted or destroyed and when the bridge stops. It has no restart policy:
// a container that exits or is killed while a command runs answers that
// command at once with runtime_stopped, its exit status and its last log
// lines, and the next command runs in a fresh container. State asks the
// engine, never a remembered guess.
//
// # Commands
//
// Each command is an exec: /bin/sh -c under a small wrapper that notes the
// exec's process group (runc makes every exec a session leader) in /tmp,
// so a timeout or a tool_cancel kills the whole group from a second exec
// (the Engine API has no way to signal an exec), and that ends what the
// command left running in its group when it is done, as the other
// runtimes do.
package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// Defaults of Provider.
const (
	// DefaultHost is the engine's socket when neither Provider.Host nor
	// DOCKER_HOST names one.
	DefaultHost = "unix:///var/run/docker.sock"
	// DefaultIdle is how long a container waits for a command before it
	// is stopped.
	DefaultIdle = 10 * time.Minute
)

// Provider starts container runtimes. Its fields must not change once it
// is in use. Close it when done, to close the engine's connections.
type Provider struct {
	// Host is the engine's address, "unix:///path/to/socket"; default
	// the environment's DOCKER_HOST, else DefaultHost.
	Host string
	// Image is the image of a workspace whose options name none; with
	// none here either, acquiring a container workspace needs
	// container.image.
	Image string
	// AllowHostNetwork lets a workspace ask for network "host"; without
	// it such a request answers invalid_payload.
	AllowHostNetwork bool
	// Idle is how long a container may go without a command before it is
	// stopped (the next command starts it again); default DefaultIdle,
	// negative never.
	Idle time.Duration
	// OutputCap bounds a result's output; default
	// sandbox.DefaultOutputCap.
	OutputCap int

	once   sync.Once
	cli    *client.Client
	cliErr error
}

var (
	_ sandbox.RuntimeProvider = (*Provider)(nil)
	_ sandbox.RuntimeStater   = (*Provider)(nil)
)

// Name implements sandbox.RuntimeProvider.
func (*Provider) Name() string { return sandbox.RuntimeContainer }

// host is the engine's address this provider talks to.
func (p *Provider) host() string {
	if p.Host != "" {
		return p.Host
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return DefaultHost
}

// client returns the engine's client, made once. The client connects on
// its first request and agrees on the API version with the engine then
// (podman 4 serves 1.41).
func (p *Provider) client() (*client.Client, error) {
	p.once.Do(func() {
		p.cli, p.cliErr = client.NewClientWithOpts(client.WithHost(p.host()), client.WithAPIVersionNegotiation())
		if p.cliErr != nil {
			p.cliErr = protocol.Errorf(protocol.CodeRuntimeUnavailable, "the container engine address %q: %v", p.host(), p.cliErr)
		}
	})
	return p.cli, p.cliErr
}

// Close closes the engine's connections. Runtimes started by p must be
// stopped first.
func (p *Provider) Close() error {
	p.once.Do(func() { p.cliErr = errors.New("the container provider is closed") })
	if p.cli != nil {
		return p.cli.Close()
	}
	return nil
}

// Available reports whether the engine answers, asking it each time (an
// engine may come and go); sandbox.RuntimeStatuses calls it.
func (p *Provider) Available() error {
	cli, err := p.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return p.engineError(err)
	}
	return nil
}

// engineError turns an error of the engine's client into what a caller
// acts on: runtime_unavailable naming the socket when the engine does
// not answer; any other error as it is.
func (p *Provider) engineError(err error) error {
	if err == nil {
		return nil
	}
	if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) {
		return protocol.Errorf(protocol.CodeRuntimeUnavailable, "no container engine answers at %s (DOCKER_HOST): %v", p.host(), err)
	}
	return err
}

// DefaultOptions implements sandbox.OptionDefaulter: a workspace that
// names no image runs the bridge's (--container-image).
func (p *Provider) DefaultOptions(opts sandbox.ContainerOptions) sandbox.ContainerOptions {
	if opts.Image == "" {
		opts.Image = p.Image
	}
	return opts
}

// Start implements sandbox.RuntimeProvider. It checks what the workspace
// asks for (network, options, the image on the engine) and creates
// nothing: the container comes with the first command.
func (p *Provider) Start(ctx context.Context, spec sandbox.RuntimeSpec) (sandbox.Runtime, error) {
	if spec.Network == sandbox.NetworkHost && !p.AllowHostNetwork {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload,
			"network \"host\": this bridge does not let containers use the host's network (tether bridge --container-allow-host-network)")
	}
	opts := spec.Container
	if err := opts.Check(); err != nil {
		return nil, err
	}
	if opts.Image == "" {
		opts.Image = p.Image
	}
	if opts.Image == "" {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "container.image is required: this bridge has no default image (tether bridge --container-image)")
	}
	mem, _ := opts.MemoryBytes()
	cli, err := p.client()
	if err != nil {
		return nil, err
	}
	if _, err := cli.ImageInspect(ctx, opts.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload,
				"container.image %q: the engine at %s has no such image, and nothing is pulled: build or load it there first", opts.Image, p.host())
		}
		return nil, p.engineError(fmt.Errorf("inspecting image %s: %w", opts.Image, err))
	}
	r := &runtime{p: p, cli: cli, spec: spec, opts: opts, memory: mem, gate: make(chan struct{}, 1)}
	r.watchCtx, r.stopWatch = context.WithCancel(context.Background())
	return r, nil
}

// State implements sandbox.RuntimeStater: the engine's word on the
// workspace's container, found by its name.
func (p *Provider) State(ctx context.Context, spec sandbox.RuntimeSpec) (state, detail string, err error) {
	cli, err := p.client()
	if err != nil {
		return "", "", err
	}
	info, err := cli.ContainerInspect(ctx, spec.Name)
	if cerrdefs.IsNotFound(err) {
		return sandbox.RuntimeMissing, "", nil
	}
	if err != nil {
		return "", "", p.engineError(fmt.Errorf("inspecting container %s: %w", spec.Name, err))
	}
	id := info.ID
	if len(id) > 12 {
		id = id[:12]
	}
	if info.State != nil && info.State.Running {
		return sandbox.RuntimeRunning, "container " + id + " running since " + info.State.StartedAt, nil
	}
	detail = "container " + id
	if info.State != nil {
		detail += fmt.Sprintf(" %s, exit status %d", info.State.Status, info.State.ExitCode)
		if info.State.OOMKilled {
			detail += ", out of memory"
		}
	}
	return sandbox.RuntimeStopped, detail, nil
}
