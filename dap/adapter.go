//go:build !windows

package dap

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Adapter is one kind of debug adapter. Implementations are stateless. Each
// adapter lives in its own file (adapter_lldb.go, adapter_debugpy.go,
// adapter_delve.go, adapter_node.go): a new adapter is one more file set
// and one more value in Adapters.
type Adapter interface {
	// Name is the adapter's name in debug_adapters and session results.
	Name() string
	// Types are the launch.json "type" values it serves.
	Types() []string
	// Languages are the language names start-session accepts for it.
	Languages() []string
	// InstallHint names what to install when Find finds nothing.
	InstallHint() string
	// Find locates the adapter with the search path in env; it returns
	// an error naming what it looked for when nothing usable is there.
	Find(env *Env) (Command, error)
	// Arguments turns a launch or attach configuration into this adapter's
	// launch/attach arguments. cfg is already a private copy.
	Arguments(cfg map[string]any) map[string]any
}

// Adapters is the registry, in the order debug_adapters lists them.
var Adapters = []Adapter{lldbDAP{}, debugpyAdapter{}, delveAdapter{}, nodeAdapter{}}

// adapterFor finds the adapter serving a launch.json type or a language.
func adapterFor(typ, language string) (Adapter, error) {
	key := strings.ToLower(typ)
	for _, a := range Adapters {
		for _, t := range a.Types() {
			if key != "" && t == key {
				return a, nil
			}
		}
		for _, l := range a.Languages() {
			if key == "" && l == strings.ToLower(language) {
				return a, nil
			}
		}
	}
	switch key {
	case "node-terminal", "chrome", "pwa-chrome", "msedge", "pwa-msedge", "extensionhost", "pwa-extensionhost":
		return nil, fmt.Errorf("launch type %q is not supported by this bridge (it debugs node and pwa-node programs, not browsers or terminals)", typ)
	}
	if key != "" {
		return nil, fmt.Errorf("no debug adapter serves launch type %q", typ)
	}
	return nil, fmt.Errorf("no debug adapter serves language %q", language)
}

// Optional hooks. An adapter whose behaviour follows the protocol implements
// only Adapter; an adapter with a quirk also implements the one small
// interface below that names it, in its own file, and the session asks for
// it where the quirk matters. Interfaces rather than methods with defaults
// on Adapter: an adapter without the quirk has nothing to write (not even a
// no-op), and reading an adapter's file shows every quirk it has.

// dialer is an adapter that some configurations reach on TCP, served by
// another process, instead of starting it.
type dialer interface {
	// DialAddress is the host:port to connect to for cfg, or "".
	DialAddress(cfg map[string]any) string
}

// stopContext is what a session knew when a stopped event came.
type stopContext struct {
	first   bool // no stop came before this one
	entry   bool // the launch asked for stopOnEntry
	pausing bool // a pause was sent and no stop came since
}

// stopFixer is an adapter that reports some stops under another reason
// than DAP's: fixStop rewrites st (the event as received) in place. It runs
// on the client's read goroutine with the session's lock held, so it must
// only look at its arguments.
type stopFixer interface {
	fixStop(st *StopInfo, at stopContext)
}

// pauseConfirmer is an adapter whose pause may be answered without the
// stopped event DAP promises. confirmPause runs once the pause request was
// answered, before the session's wait for the next stop (bounded by wait,
// the caller's bound): it may ask again and may mark the session stopped
// itself (Session.assumePaused). before is the stop count before the pause,
// thread the paused thread. It fails only when the adapter failed or ctx
// ended.
type pauseConfirmer interface {
	confirmPause(ctx context.Context, s *Session, c *Client, thread, before int, wait time.Duration) error
}

// childSessions is an adapter that runs each debuggee in a child session
// it asks for with the startDebugging reverse request (js-debug), when
// started as spec. initialize then advertises startDebugging, and the
// session opens the child on a second connection to the adapter
// (session_children.go) and sends its requests there.
type childSessions interface {
	childSessions(spec Command) bool
}

// workDirer is an adapter that must run in a directory of its own choosing
// for cfg (delve builds the program where it runs: the program's module
// root), rather than in the debuggee's cwd; "" keeps the cwd.
type workDirer interface {
	workDir(cfg map[string]any) string
}

// describer is an adapter served by one of several programs:
// debug_adapters says which (implementation) and its version.
type describer interface {
	describe(env *Env) (implementation, version string)
}

func rename(m map[string]any, from, to string) {
	if v, ok := m[from]; ok {
		if _, exists := m[to]; !exists {
			m[to] = v
		}
		delete(m, from)
	}
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}
