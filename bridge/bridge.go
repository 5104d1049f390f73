//go:build !windows

package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/rawnet"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/terminal"
)

// Defaults for the zero values of Config.
const (
	DefaultBackoffMin       = 100 * time.Millisecond
	DefaultBackoffMax       = 10 * time.Second
	DefaultAuthBackoff      = time.Minute
	DefaultReplacedBackoff  = 5 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultMaxHTTPBody      = 16 << 20
)

// Config configures a Bridge. Only BrokerURL with WorkspaceID, or an HTTP
// listener, is needed; every other zero value means its default.
type Config struct {
	// BrokerURL is where the broker listens: http(s)://host[:port][/prefix],
	// ws(s)://…, or host:port. Empty means no broker connection (the routes are
	// then served only over HTTP and Dispatch).
	BrokerURL string
	// WorkspaceID is the one workspace this bridge serves; required with
	// BrokerURL.
	WorkspaceID string
	// Token authenticates the bridge: it is sent in the Socket.IO CONNECT
	// payload and as "Authorization: Bearer" on the WebSocket upgrade. It is
	// never logged.
	Token string
	// Root is the workspace directory the routes serve; default the current
	// directory. It must exist.
	Root string

	// HTTPAddr, if set, serves the route table over plain HTTP on this
	// address (e.g. "127.0.0.1:8765") while Run runs; see HTTPHandler.
	HTTPAddr string
	// HTTPListener is an already-open listener used instead of HTTPAddr
	// (tests pass one on port 0 to learn the address). Run closes it.
	HTTPListener net.Listener
	// MaxHTTPBody bounds a request body on the HTTP listener; default
	// DefaultMaxHTTPBody.
	MaxHTTPBody int64
	// HTTPToken is the bearer token every request to the HTTP listener
	// must carry (http_token.go); empty: a random one for this Bridge.
	// Run writes it to the listener's TokenFile, in HTTPTokenDir (default
	// runfile.Dir()), and removes the file when it returns.
	HTTPToken    string
	HTTPTokenDir string

	// Terminal configures the terminal routes: OutputCap, KillGrace,
	// DefaultTimeout, MaxSessions, Shell (zero fields take the terminal
	// package's defaults). Root and Logger are always the bridge's.
	Terminal terminal.Config

	// SandboxDir, if set, mounts the /api/sandbox/… routes serving repo
	// caches and worktree workspaces kept in this directory (see package
	// sandbox). Empty leaves them unmounted.
	SandboxDir string
	// SandboxContainer configures the sandbox's container runtime
	// (package sandbox/container), offered with the others when
	// SandboxDir is set.
	SandboxContainer SandboxContainerConfig

	// ReadOnly (tether bridge --read-only) serves only the routes that
	// neither write a file nor run a program: reading, listing, searching
	// and git status/diff of the root, debug-context, ping and
	// capabilities. Every other route, the terminal's, the debugger's, the
	// sandbox's, the file writes and any route mounted with Handle,
	// answers forbidden naming the flag, and `tether attach` is refused.
	ReadOnly bool
	// Disable (tether bridge --disable) lists route groups (Groups()) that
	// answer forbidden naming the flag. An unknown name fails New.
	Disable []string

	// DebugAttachAllow (tether bridge --debug-attach-allow) are the
	// addresses a debug session may attach to over the network; nil:
	// loopback only (dap.DefaultAttachAllow).
	DebugAttachAllow []netip.Prefix
	// DebugWarmAdapters (tether bridge --warm-adapters, on there) keeps a
	// started and initialized debug adapter ready per adapter kind the
	// workspace has used (dap.Config.WarmAdapters); DebugWarmIdle ends one
	// unused that long (default dap.DefaultWarmIdle).
	DebugWarmAdapters bool
	DebugWarmIdle     time.Duration

	// MaxInFlight bounds the handlers running at once, over all transports;
	// beyond it calls are answered overloaded. Default DefaultMaxInFlight.
	MaxInFlight int

	// Logger receives one event per lifecycle point; the zero value logs
	// nothing.
	Logger zerolog.Logger
	// Audit is the audit log (--audit-log, package audit): a line per
	// call and per connection event. Nil: none. The bridge does not close
	// it.
	Audit *audit.Log

	// Reconnect backoff after a failed attempt or a lost connection: a
	// random delay in [0, min(BackoffMax, BackoffMin·2^attempt)) ("full
	// jitter"), with attempt reset by every successful connect.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// AuthBackoff is the delay, with jitter in [AuthBackoff/2, AuthBackoff),
	// after the broker refused the credentials (unauthorized or forbidden):
	// retrying fast would only flood the broker's logs.
	AuthBackoff time.Duration
	// ReplacedBackoff is the delay, with jitter in [ReplacedBackoff/2,
	// ReplacedBackoff), after the broker disconnected this bridge because a
	// newer connection took over the workspace. Reconnecting takes the
	// workspace back, so two bridges for one workspace alternate at this
	// pace rather than fight.
	ReplacedBackoff time.Duration
	// HandshakeTimeout bounds dialing plus the Engine.IO and Socket.IO
	// handshakes. Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// HTTPClient dials the broker (TLS settings, proxies); default
	// http.DefaultClient's settings, its TCP connections read and written
	// through internal/rawnet (no wake of the runtime's monitor thread per
	// read: the bridge is idle between most of them).
	HTTPClient *http.Client
}

// defaultClient is Config.HTTPClient's default.
var defaultClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = rawnet.Dial(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	return &http.Client{Transport: t}
}()

// Bridge connects one workspace to a broker and serves its routes. Create it
// with New, mount extra routes on Router, then call Run once. Router must be
// used before serving starts; every other method is safe for concurrent use.
type Bridge struct {
	cfg    Config
	log    zerolog.Logger // carries workspace_id
	router *Router
	d      *dispatcher
	wsURL  string
	root   string
	header http.Header   // upgrade headers, read-only after New
	tree   *sandbox.Tree // the root, for the workspace routes
	term   *lazy[*terminal.Manager]
	sbx    *lazy[*sandbox.Service] // nil without Config.SandboxDir
	// sbxRuntimes are the sandbox Service's runtimes, for capabilities.
	sbxRuntimes []sandbox.RuntimeProvider
	// sbxClose closes what the sandbox's runtimes hold (the container
	// engine's connections) once the Service is closed.
	sbxClose func()
	debug    *lazy[*dap.Manager]

	running atomic.Bool

	httpToken string                 // Config.HTTPToken or a random one
	tokenPath atomic.Pointer[string] // the token file, once the listener is up

	connMu sync.Mutex
	connCh chan struct{} // closed while connected; replaced on disconnect
}

// New validates cfg, fills in defaults and mounts the built-in routes. It
// opens no connection and starts no goroutine.
func New(cfg Config) (*Bridge, error) {
	if cfg.MaxInFlight < 0 {
		return nil, fmt.Errorf("bridge: MaxInFlight must not be negative, got %d", cfg.MaxInFlight)
	}
	setDefault(&cfg.MaxInFlight, DefaultMaxInFlight)
	setDefault(&cfg.MaxHTTPBody, DefaultMaxHTTPBody)
	setDefault(&cfg.BackoffMin, DefaultBackoffMin)
	setDefault(&cfg.BackoffMax, DefaultBackoffMax)
	setDefault(&cfg.AuthBackoff, DefaultAuthBackoff)
	setDefault(&cfg.ReplacedBackoff, DefaultReplacedBackoff)
	setDefault(&cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = defaultClient
	}
	if cfg.HTTPAddr != "" && cfg.HTTPListener != nil {
		return nil, errors.New("bridge: set HTTPAddr or HTTPListener, not both")
	}

	b := &Bridge{cfg: cfg, connCh: make(chan struct{}), httpToken: cfg.HTTPToken}
	if b.httpToken == "" {
		b.httpToken = newHTTPToken()
	}
	if cfg.BrokerURL != "" {
		if cfg.WorkspaceID == "" {
			return nil, errors.New("bridge: WorkspaceID is required with BrokerURL")
		}
		u, err := socketURL(cfg.BrokerURL)
		if err != nil {
			return nil, fmt.Errorf("bridge: %w", err)
		}
		b.wsURL = u
		b.header = http.Header{}
		if cfg.Token != "" {
			b.header.Set("Authorization", "Bearer "+cfg.Token)
		}
	}

	root := cfg.Root
	if root == "" {
		root = "."
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("bridge: resolving root: %w", err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("bridge: checking root: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("bridge: root %s is not a directory", root)
	}
	b.root = root
	if b.tree, err = sandbox.NewTree(root, sandbox.TreeOptions{}); err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	pol, err := newPolicy(cfg.ReadOnly, cfg.Disable)
	if err != nil {
		return nil, err
	}

	b.log = cfg.Logger.With().Str("workspace_id", cfg.WorkspaceID).Logger()
	b.router = newRouter(pol)
	b.d = newDispatcher(b.router, &b.log, cfg.WorkspaceID, cfg.MaxInFlight)
	b.d.audit = cfg.Audit
	mountRoutes(b.router, b)
	return b, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Router returns the route table, to mount more routes with Handle before
// serving starts.
func (b *Bridge) Router() *Router { return b.router }

// Root returns the absolute workspace directory.
func (b *Bridge) Root() string { return b.root }

// Connected returns a channel that is closed once the bridge holds a
// connection the broker accepted (Socket.IO CONNECT acknowledged). When that
// connection ends, later calls return a new channel for the next one. Without
// a BrokerURL the channel never closes.
func (b *Bridge) Connected() <-chan struct{} {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	return b.connCh
}

// WaitConnected blocks until the bridge is connected to the broker or ctx
// ends, and returns ctx's error in the latter case.
func (b *Bridge) WaitConnected(ctx context.Context) error {
	select {
	case <-b.Connected():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Bridge) setConnected(on bool) {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	if on {
		close(b.connCh)
	} else {
		b.connCh = make(chan struct{})
	}
}

// Dispatch serves call in-process, with the same guarantees as a call from
// the broker: bounded concurrency, handler deadline, recovery, error codes.
// It returns the call's one response, no later than the call's timeout
// (protocol.DefaultTimeout when zero). Cancelling ctx answers cancelled.
// A handler that overruns keeps running after Dispatch returned; Run, if it
// runs, waits for it before returning.
func (b *Bridge) Dispatch(ctx context.Context, call protocol.ToolCall) protocol.ToolResponse {
	received := time.Now()
	resp := b.d.dispatch(ctx, &call, received, audit.DoorInproc)
	b.d.callLog(&call).Debug().Str("transport", "inproc").Bool("success", resp.Success).
		Str("code", resp.Error).Dur("duration", time.Since(received)).Msg("response sent")
	return resp
}

// Run connects to the broker and serves calls until ctx ends, reconnecting
// whenever the connection is lost; if an HTTP listener is configured it serves
// that too. It returns only after every goroutine it started has ended,
// including handlers still running past their deadline (handlers that ignore
// their ctx therefore delay Run's return; that is logged). Run returns nil
// when ctx ended, or the error that stopped it (the HTTP listener failing).
// It may be called once.
func (b *Bridge) Run(ctx context.Context) error {
	if !b.running.CompareAndSwap(false, true) {
		return errors.New("bridge: Run called twice")
	}
	b.router.freeze()
	defer b.waitHandlers()
	// Runs before waitHandlers, once no transport accepts calls: killing
	// every command ends the terminal handlers still running, and no
	// process a command started outlives Run.
	defer b.term.close()
	if b.sbxClose != nil {
		defer b.sbxClose() // after the Service: its containers are removed first
	}
	defer b.sbx.close()
	defer b.debug.close() // no adapter or debuggee outlives Run

	parent := ctx
	ctx, stop := context.WithCancelCause(parent)
	defer stop(nil)

	var wg sync.WaitGroup
	defer wg.Wait()
	if b.cfg.HTTPAddr != "" || b.cfg.HTTPListener != nil {
		srv, err := b.startHTTP(ctx, stop, &wg)
		if err != nil {
			return err
		}
		defer srv.shutdown()
	}

	if b.wsURL != "" {
		b.connectLoop(ctx)
	} else {
		<-ctx.Done()
	}
	if parent.Err() != nil {
		return nil
	}
	return context.Cause(ctx) // set by whatever stopped Run from inside
}

// waitHandlers waits for handler goroutines, which end once their cancelled
// ctx is honoured, and names the wait when it is long so that a stuck handler
// is visible.
func (b *Bridge) waitHandlers() {
	done := make(chan struct{})
	go func() {
		b.d.handlers.Wait()
		close(done)
	}()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			b.log.Warn().Int("in_flight", len(b.d.slots)).Msg("waiting for handlers that ignore their cancelled context")
		}
	}
}
