//go:build !windows

package dap

import (
	"fmt"
	"io"
	"strings"

	"github.com/tetherdev/tether/dap/node"
)

// nodeAdapter debugs Node.js programs (JavaScript, and TypeScript through
// source maps). It is js-debug when one is installed (jsdebug.go) and
// otherwise tether's built-in CDP adapter (package dap/node), which needs
// only node.
//
// Its quirks: it is served by one of two programs (describer), and
// js-debug runs each real target as a child session it asks for with
// startDebugging (childSessions).
type nodeAdapter struct{}

var (
	_ describer     = nodeAdapter{}
	_ childSessions = nodeAdapter{}
)

// childSessions: js-debug (a TCP server) runs its targets as children; the
// built-in adapter (in-process) does not.
func (nodeAdapter) childSessions(spec Command) bool { return spec.Listen }

func (nodeAdapter) Name() string { return "node" }
func (nodeAdapter) Types() []string {
	return []string{"node", "pwa-node"}
}
func (nodeAdapter) Languages() []string {
	return []string{"javascript", "js", "node", "nodejs", "typescript", "ts"}
}
func (nodeAdapter) InstallHint() string {
	return "install Node.js (Debian/Ubuntu: apt install nodejs), which provides node"
}

// Find prefers js-debug, then the built-in adapter over the node on PATH.
func (nodeAdapter) Find(env *Env) (Command, error) {
	if js := env.jsDebug(); js.server != "" {
		return js.command(), nil
	}
	nodePath := env.lookVersioned("node")
	if nodePath == "" {
		nodePath = env.look("nodejs")
	}
	if nodePath == "" {
		return Command{}, fmt.Errorf("no node (nor nodejs) is on PATH")
	}
	return Command{Path: nodePath, Serve: func(conn io.ReadWriteCloser, dir string, environ []string) {
		node.Serve(conn, node.Options{Node: nodePath, Dir: dir, Environ: environ, Warm: env.nodeWarm})
	}}, nil
}

// describe: js-debug (when found) or builtin-cdp, with node's version.
func (nodeAdapter) describe(env *Env) (string, string) {
	if js := env.jsDebug(); js.server != "" {
		return "js-debug", ""
	}
	return "builtin-cdp", env.nodeVersion(env.lookVersioned("node"))
}

// Arguments turns tether's and VS Code's spellings into what both
// implementations read: connect → address and port, processId as a pid.
func (nodeAdapter) Arguments(cfg map[string]any) map[string]any {
	if c, ok := cfg["connect"].(map[string]any); ok {
		delete(cfg, "connect")
		if h, ok := c["host"]; ok {
			cfg["address"] = h
		}
		if p, ok := c["port"]; ok {
			cfg["port"] = p
		}
	}
	if t, _ := cfg["type"].(string); t == "" || strings.HasPrefix(t, "node") {
		cfg["type"] = "pwa-node"
	}
	delete(cfg, "console")
	return cfg
}
