//go:build !windows

package dap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/retain"
	"github.com/tetherdev/tether/protocol"
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("dap: manager closed")

// Config configures a Manager.
type Config struct {
	// Root is the workspace directory: relative programs, cwds and breakpoint
	// paths are taken from it, and launch.json is read from it. Required.
	Root string
	// Path is where adapters and debuggers are looked up; default $PATH.
	Path string
	// Environ is the environment of adapters and debuggees; default the
	// process's own.
	Environ []string
	// Logger receives one event per session lifecycle point.
	Logger zerolog.Logger
	// AttachAllow are the addresses an attach may connect to (attach.go);
	// nil: DefaultAttachAllow, loopback only.
	AttachAllow []netip.Prefix
	// WarmAdapters keeps a started and initialized adapter ready per
	// adapter kind the workspace has used, and prebuilds Go programs
	// (warm.go, warm_build.go); off by default, the bridge turns it on.
	WarmAdapters bool
	// WarmIdle ends a warm adapter unused for this long; default
	// DefaultWarmIdle.
	WarmIdle time.Duration
}

// Manager holds the debug sessions of one workspace. All methods are safe for
// concurrent use. Close ends every session; no adapter or debuggee it
// started outlives it.
type Manager struct {
	root        string
	env         *Env
	log         zerolog.Logger
	attachAllow []netip.Prefix
	warm        *warmPool // nil when warm adapters are off

	mu       sync.Mutex
	sessions map[string]*Session
	order    []string
	closed   bool
	starting sync.WaitGroup
	closing  context.Context // cancelled by Close, ending starts in flight
	cancel   context.CancelFunc
}

// NewManager validates cfg and returns a Manager. It starts nothing.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Root == "" {
		return nil, errors.New("dap: Config.Root is required")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("dap: resolving root: %w", err)
	}
	path := cfg.Path
	if path == "" {
		path = os.Getenv("PATH")
	}
	environ := cfg.Environ
	if environ == nil {
		environ = os.Environ()
	}
	allow := cfg.AttachAllow
	if allow == nil {
		allow = DefaultAttachAllow
	}
	closing, cancel := context.WithCancel(context.Background())
	m := &Manager{root: root, env: NewEnv(path, environ), log: cfg.Logger, sessions: map[string]*Session{},
		closing: closing, cancel: cancel, attachAllow: allow}
	if cfg.WarmAdapters {
		m.warm = newWarmPool(cfg.WarmIdle, m.env, cfg.Logger, closing)
	}
	return m, nil
}

// Env returns the manager's lookup environment.
func (m *Manager) Env() *Env { return m.env }

// DebugContext describes what this workspace offers for debugging. Adapters
// are probed once per Manager.
func (m *Manager) DebugContext(ctx context.Context, req ContextRequest) *DebugContext {
	dc := &DebugContext{LaunchConfigs: []LaunchConfig{}, DebugAdapters: []AdapterInfo{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		if a := m.env.Available(ctx); a != nil {
			dc.DebugAdapters = a
		}
	})
	wg.Go(func() { dc.NativeDebuggers = m.env.NativeDebuggers() })
	cfgs, err := ReadLaunchJSON(m.root, m.vars(req.File))
	if err != nil {
		dc.LaunchError = err.Error()
	} else if cfgs != nil {
		dc.LaunchConfigs = cfgs
	}
	dc.InferredCommands = InferCommands(m.root)
	wg.Wait()
	return dc
}

func (m *Manager) vars(file string) Vars {
	return Vars{WorkspaceFolder: m.root, File: file, Env: m.getenv}
}

func (m *Manager) getenv(k string) string { return m.env.getenv(k) }

func absIn(root, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "dbg-" + hex.EncodeToString(b[:])
}

// resolve turns a start request into an adapter and its configuration.
func (m *Manager) resolve(ctx context.Context, req *StartRequest) (Adapter, map[string]any, error) {
	var cfg map[string]any
	field := "config."
	switch {
	case req.Config != nil:
		// A private deep copy, variables resolved.
		raw, err := json.Marshal(req.Config)
		if err != nil {
			return nil, nil, protocol.Errorf(protocol.CodeInvalidPayload, "config: %v", err)
		}
		_ = json.Unmarshal(raw, &cfg)
		cfg = m.vars(req.File).resolveAll(cfg).(map[string]any)
	case req.ConfigName != "":
		cfgs, err := ReadLaunchJSON(m.root, m.vars(req.File))
		if err != nil {
			return nil, nil, protocol.Errorf(protocol.CodeInvalidPayload, "%v", err)
		}
		for _, c := range cfgs {
			if c.Name() == req.ConfigName {
				cfg = c
				break
			}
		}
		if cfg == nil {
			names := make([]string, 0, len(cfgs))
			for _, c := range cfgs {
				names = append(names, c.Name())
			}
			return nil, nil, protocol.Errorf(protocol.CodeInvalidPayload, "no configuration named %q in %s (have %q)", req.ConfigName, LaunchFile, names)
		}
	case req.Language != "":
		field = ""
		cfg = map[string]any{"name": req.Language + " session"}
		request := req.Request
		if request == "" {
			request = "launch"
		}
		cfg["request"] = request
		if req.Program != "" {
			cfg["program"] = req.Program
		}
		if req.Args != nil {
			cfg["args"] = req.Args
		}
		if req.Cwd != "" {
			cfg["cwd"] = req.Cwd
		}
		if len(req.Env) > 0 {
			env := map[string]any{}
			for k, v := range req.Env {
				env[k] = v
			}
			cfg["env"] = env
		}
		if req.StopOnEntry {
			cfg["stopOnEntry"] = true
		}
		if req.Pid > 0 {
			cfg["processId"] = req.Pid
		}
		if req.Connect != nil {
			host := req.Connect.Host
			if host == "" {
				host = "127.0.0.1"
			}
			cfg["connect"] = map[string]any{"host": host, "port": req.Connect.Port}
		}
	default:
		return nil, nil, protocol.Errorf(protocol.CodeInvalidPayload, "give config, config_name, or language with program (or pid/connect to attach)")
	}

	typ, _ := cfg["type"].(string)
	a, err := adapterFor(typ, req.Language)
	if err != nil {
		return nil, nil, protocol.Errorf(protocol.CodeDebugAdapterUnavailable, "%v", err)
	}
	if r, _ := cfg["request"].(string); r == "" {
		cfg["request"] = "launch"
	}
	if cfg["request"] != "launch" && cfg["request"] != "attach" {
		return nil, nil, protocol.Errorf(protocol.CodeInvalidPayload, "request must be launch or attach, got %v", cfg["request"])
	}
	if cfg["request"] == "launch" {
		if p, ok := cfg["program"].(string); ok {
			cfg["program"] = absIn(m.root, p)
		} else if _, mod := cfg["module"]; !mod {
			return nil, nil, protocol.Errorf(protocol.CodeInvalidPayload, "a launch needs a program")
		}
		if cwd, ok := cfg["cwd"].(string); ok && cwd != "" {
			cfg["cwd"] = absIn(m.root, cwd)
		} else {
			cfg["cwd"] = m.root
		}
	}
	if err := guardAttach(ctx, cfg, field, m.attachAllow); err != nil {
		return nil, nil, err
	}
	cfg["console"] = "internalConsole"
	return a, a.Arguments(cfg), nil
}

// Start starts a session: it resolves the request to an adapter and its
// configuration, launches the adapter, runs the handshake that works with
// every adapter (Session.handshake) and returns once the program runs (or
// has stopped on entry).
func (m *Manager) Start(ctx context.Context, req StartRequest) (*StartResult, error) {
	a, cfg, err := m.resolve(ctx, &req)
	if err != nil {
		return nil, err
	}
	paths, err := newPathMap(m.root, req.PathMappings)
	if err != nil {
		return nil, err
	}
	var core *coreInfo
	if req.CoreFile != "" {
		if core, err = postMortem(m.root, a, cfg, &req); err != nil {
			return nil, err
		}
	}
	// Bad breakpoints are answered before anything starts.
	files := make([]FileBreakpoints, len(req.Breakpoints))
	for i, fb := range req.Breakpoints {
		files[i] = fb
		if files[i].Breakpoints, err = resolveLines(m.root, fb.Path, fmt.Sprintf("breakpoints[%d].breakpoints", i), fb.Breakpoints); err != nil {
			return nil, err
		}
	}
	req.Breakpoints = files
	var spec Command
	if d, ok := a.(dialer); ok && d.DialAddress(cfg) != "" {
		spec = Command{Dial: d.DialAddress(cfg)}
	} else if spec, err = a.Find(m.env); err != nil {
		return nil, protocol.Errorf(protocol.CodeDebugAdapterUnavailable, "%s: %v; %s", a.Name(), err, a.InstallHint())
	}
	if p, ok := cfg["program"].(string); ok && cfg["request"] == "launch" {
		if _, err := os.Stat(p); err != nil {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "program %s does not exist", p)
		}
	}

	ctx, done, err := m.beginStart(ctx)
	if err != nil {
		return nil, err
	}
	defer done()

	id := newID()
	log := m.log.With().Str("session_id", id).Str("adapter", a.Name()).Logger()
	s, res, err := m.startSession(ctx, id, a, spec, cfg, req, core, paths, m.warm)
	if err != nil && s.warmUsed && s.proc.client.Err() != nil && ctx.Err() == nil {
		// The warm adapter went away during the start: that is no
		// answer to give, a cold start is (the same one, or its error).
		log.Info().Str("error", logLine(err)).Msg("warm debug adapter failed; starting cold")
		s.Stop(ctx, nil)
		s, res, err = m.startSession(ctx, id, a, spec, cfg, req, core, paths, nil)
	}
	if err == nil && core != nil {
		s.awaitCrashStop(ctx, res)
	}
	if err == nil {
		m.mu.Lock()
		if m.closed {
			err = ErrClosed
		} else {
			m.addLocked(s)
		}
		m.mu.Unlock()
	}
	if err != nil {
		log.Info().Str("error", logLine(err)).Msg("debug session failed to start")
		if s.proc != nil {
			s.Stop(ctx, nil)
		}
		return nil, err
	}
	log.Info().Str("state", res.State).Msg("debug session started")
	return res, nil
}

// startSession makes a session and runs its handshake, with adapters from
// warm (nil: all cold). cfg is not changed (a prebuild rewrites a copy),
// so a cold retry starts from the same one.
func (m *Manager) startSession(ctx context.Context, id string, a Adapter, spec Command, cfg map[string]any, req StartRequest, core *coreInfo, paths pathMap, warm *warmPool) (*Session, *StartResult, error) {
	s := newSession(id, a, m.root)
	s.paths = paths
	s.warm = warm
	s.name, _ = cfg["name"].(string)
	s.request, _ = cfg["request"].(string)
	s.entryStop, _ = cfg["stopOnEntry"].(bool)
	s.core, s.launch = core, newLaunchSpec(spec, cfg, req, m.env.Environ)
	res, err := s.handshake(ctx, spec, cfg, &req, m.env.Environ)
	return s, res, err
}

// WarmAdapters lists the warm adapters ready now (none when they are off).
func (m *Manager) WarmAdapters() []WarmAdapter { return m.warm.list() }

// Session returns a session by id, or session_not_found.
func (m *Manager) Session(id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	s := m.sessions[id]
	if s == nil {
		if id == "" {
			return nil, protocol.Errorf(protocol.CodeInvalidPayload, "session_id is required")
		}
		return nil, protocol.Errorf(protocol.CodeSessionNotFound, "no debug session %q", id)
	}
	return s, nil
}

// keepEnded is how many ended sessions stay listed (and answer
// session_ended); older ones whose adapter is gone too are forgotten
// (session_not_found), as the terminal's ended sessions are. An ended
// session keeps its adapter's state and its output: a workspace that starts
// sessions all day would hold them all.
const keepEnded = 100

// addLocked makes s findable by id, forgetting the oldest retired sessions
// beyond keepEnded; m.mu must be held.
func (m *Manager) addLocked(s *Session) {
	m.sessions[s.id] = s
	m.order = retain.Prune(append(m.order, s.id), m.sessions, (*Session).retired, keepEnded)
}

// List describes every session, oldest first, the last keepEnded ended ones
// included.
func (m *Manager) List() *SessionList {
	m.mu.Lock()
	list := make([]*Session, 0, len(m.order))
	for _, id := range m.order {
		list = append(list, m.sessions[id])
	}
	m.mu.Unlock()
	out := &SessionList{Sessions: make([]SessionInfo, 0, len(list))}
	for _, s := range list {
		out.Sessions = append(out.Sessions, s.Info())
	}
	return out
}

// Stop ends a session (see Session.Stop). The session stays listed as
// ended (until keepEnded later ones have ended), so later calls on it answer
// session_ended.
func (m *Manager) Stop(ctx context.Context, req StopRequest) (*StopResult, error) {
	s, err := m.Session(req.SessionID)
	if err != nil {
		return nil, err
	}
	res := s.Stop(ctx, req.TerminateDebuggee)
	m.log.Info().Str("session_id", s.id).Msg("debug session stopped")
	return res, nil
}

// Close stops every session and refuses later calls. It returns when every
// adapter process has exited.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.starting.Wait()
	m.mu.Lock()
	list := slices.Collect(maps.Values(m.sessions))
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range list {
		wg.Go(func() { s.Stop(context.Background(), nil) })
	}
	wg.Go(m.warm.close)
	wg.Wait()
}

// beginStart counts a start (or a relaunch) in flight, which Close waits
// for, and returns ctx, also ended when the manager closes; done ends both.
// ErrClosed when the manager is closed already.
func (m *Manager) beginStart(ctx context.Context) (_ context.Context, done func(), err error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, nil, ErrClosed
	}
	m.starting.Add(1)
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stopAfter := context.AfterFunc(m.closing, cancel)
	return ctx, func() {
		stopAfter()
		cancel()
		m.starting.Done()
	}, nil
}
