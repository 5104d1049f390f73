//go:build !windows

package dap

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// js-debug (VS Code's JavaScript debugger) when it is installed: it is
// found through TETHER_JS_DEBUG (the path of its dapDebugServer.js), a
// js-debug-adapter on PATH, or a VS Code or Cursor extension folder, and is
// then preferred to the built-in adapter for node and pwa-node
// configurations. It serves DAP on TCP and runs each real debuggee as a
// child session it asks for with the startDebugging reverse request
// (session_children.go). js-debug cannot be installed on the machines the
// tests run on, so this path is tested against a transcript written after
// its protocol only; it is kept small on purpose.

// jsDebugServer is a js-debug found on this machine.
type jsDebugServer struct {
	server string // dapDebugServer.js, or the js-debug-adapter launcher
	node   string // the node that runs it ("" for a launcher)
}

// jsDebug finds js-debug once per Env.
func (e *Env) jsDebug() jsDebugServer {
	server, _ := e.memo(e.cache, "js-debug", func() (string, error) {
		if p := e.getenv("TETHER_JS_DEBUG"); p != "" && executableOrFile(p) {
			return p, nil
		}
		if p := e.look("js-debug-adapter"); p != "" {
			return p, nil
		}
		home := e.getenv("HOME")
		if home == "" {
			return "", nil
		}
		var found []string
		for _, dir := range []string{".vscode/extensions", ".vscode-server/extensions", ".cursor/extensions"} {
			matches, _ := filepath.Glob(filepath.Join(home, dir, "ms-vscode.js-debug-*"))
			for _, m := range matches {
				for _, rel := range []string{"src/dapDebugServer.js", "dist/src/dapDebugServer.js"} {
					if p := filepath.Join(m, rel); executableOrFile(p) {
						found = append(found, p)
					}
				}
			}
		}
		if len(found) == 0 {
			return "", nil
		}
		slices.Sort(found) // the newest version sorts last (same-width versions)
		return found[len(found)-1], nil
	})
	if server == "" {
		return jsDebugServer{}
	}
	js := jsDebugServer{server: server}
	if filepath.Ext(server) == ".js" {
		js.node = e.lookVersioned("node")
		if js.node == "" {
			return jsDebugServer{}
		}
	}
	return js
}

// command starts js-debug's DAP server on a free loopback port; it prints
// "Debug server listening at HOST:PORT".
func (js jsDebugServer) command() Command {
	port := "0"
	if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
	}
	if js.node == "" {
		return Command{Path: js.server, Args: []string{port, "127.0.0.1"}, Listen: true}
	}
	return Command{Path: js.node, Args: []string{js.server, port, "127.0.0.1"}, Listen: true}
}

func executableOrFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// getenv reads the adapters' environment (Env.Environ), not the bridge's.
func (e *Env) getenv(k string) string {
	prefix := k + "="
	for _, kv := range slices.Backward(e.Environ) {
		if len(kv) > len(prefix) && kv[:len(prefix)] == prefix {
			return kv[len(prefix):]
		}
	}
	return ""
}
