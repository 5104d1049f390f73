package dap

import (
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Adapter is one kind of debug adapter. Implementations are stateless; a
// new adapter (Node.js) is one more value in Adapters.
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
var Adapters = []Adapter{lldbDAP{}, debugpyAdapter{}, delveAdapter{}}

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
	case "node", "pwa-node", "node-terminal", "chrome", "pwa-chrome":
		return nil, fmt.Errorf("the Node.js debug adapter is not supported by this bridge yet")
	}
	if key != "" {
		return nil, fmt.Errorf("no debug adapter serves launch type %q", typ)
	}
	return nil, fmt.Errorf("no debug adapter serves language %q", language)
}

// dialer is an adapter that some configurations reach on TCP, served by
// another process, instead of starting it.
type dialer interface {
	// DialAddress is the host:port to connect to for cfg, or "".
	DialAddress(cfg map[string]any) string
}

// lldbDAP is LLVM's lldb-dap (formerly lldb-vscode), over stdio. It also
// serves cppdbg (Microsoft C/C++) and lldb (CodeLLDB) configurations.
type lldbDAP struct{}

func (lldbDAP) Name() string { return "lldb-dap" }
func (lldbDAP) Types() []string {
	return []string{"lldb-dap", "lldb", "cppdbg", "codelldb", "lldb-vscode"}
}
func (lldbDAP) Languages() []string {
	return []string{"c", "cpp", "c++", "rust", "objc", "objective-c", "swift"}
}
func (lldbDAP) InstallHint() string {
	return "install lldb-dap (Debian/Ubuntu: apt install lldb-19, which provides lldb-dap-19)"
}

func (lldbDAP) Find(env *Env) (Command, error) {
	for _, name := range []string{"lldb-dap", "lldb-vscode"} {
		if p := env.lookVersioned(name); p != "" {
			return Command{Path: p}, nil
		}
	}
	return Command{}, fmt.Errorf("neither lldb-dap, lldb-dap-NN, lldb-vscode nor lldb-vscode-NN is on PATH")
}

func (lldbDAP) Arguments(cfg map[string]any) map[string]any {
	// cppdbg spelling → lldb-dap spelling.
	rename(cfg, "stopAtEntry", "stopOnEntry")
	rename(cfg, "processId", "pid")
	if pid, ok := cfg["pid"].(string); ok {
		var n int
		if _, err := fmt.Sscan(pid, &n); err == nil {
			cfg["pid"] = n
		}
	}
	if envList, ok := cfg["environment"].([]any); ok { // cppdbg: [{name, value}]
		delete(cfg, "environment")
		env := map[string]any{}
		for _, e := range envList {
			if kv, ok := e.(map[string]any); ok {
				if n, ok := kv["name"].(string); ok {
					env[n] = fmt.Sprint(kv["value"])
				}
			}
		}
		cfg["env"] = env
	}
	// lldb-dap 19 takes env as ["K=V"]; newer versions take both.
	if env, ok := cfg["env"].(map[string]any); ok {
		list := make([]any, 0, len(env))
		for _, k := range sortedKeys(env) {
			list = append(list, k+"="+fmt.Sprint(env[k]))
		}
		cfg["env"] = list
	}
	for _, k := range []string{"MIMode", "miDebuggerPath", "setupCommands", "externalConsole", "console", "terminal"} {
		delete(cfg, k)
	}
	return cfg
}

// debugpyAdapter is debugpy's adapter (python -m debugpy.adapter), over stdio,
// run by the Python interpreter that can import debugpy.
type debugpyAdapter struct{}

func (debugpyAdapter) Name() string        { return "debugpy" }
func (debugpyAdapter) Types() []string     { return []string{"python", "debugpy"} }
func (debugpyAdapter) Languages() []string { return []string{"python", "python3", "py"} }
func (debugpyAdapter) InstallHint() string {
	return "install debugpy for a python3 on PATH (pip install debugpy, or apt install python3-debugpy)"
}

func (debugpyAdapter) Find(env *Env) (Command, error) {
	py := env.pythonWithDebugpy()
	if py == "" {
		return Command{}, fmt.Errorf("no python3 on PATH (nor /usr/bin/python3) can import debugpy")
	}
	return Command{Path: py, Args: []string{"-m", "debugpy.adapter"}}, nil
}

// DialAddress answers an attach by "connect" (or the older top-level host
// and port): debugpy.listen() in the debuggee serves its own adapter there,
// which is connected to directly. A local debugpy.adapter given "connect"
// would only wait for a debug server to connect to it, and time out.
func (debugpyAdapter) DialAddress(cfg map[string]any) string {
	if cfg["request"] != "attach" {
		return ""
	}
	if _, ok := cfg["processId"]; ok {
		return ""
	}
	addr, ok := cfg["connect"].(map[string]any)
	if !ok {
		addr = cfg
	}
	var port int
	switch p := addr["port"].(type) {
	case int:
		port = p
	case float64:
		port = int(p)
	case string:
		_, _ = fmt.Sscan(p, &port)
	}
	if port <= 0 {
		return ""
	}
	host, _ := addr["host"].(string)
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func (debugpyAdapter) Arguments(cfg map[string]any) map[string]any {
	cfg["console"] = "internalConsole"
	if _, ok := cfg["justMyCode"]; !ok {
		cfg["justMyCode"] = true
	}
	if _, ok := cfg["redirectOutput"]; !ok {
		cfg["redirectOutput"] = true
	}
	return cfg
}

// delveAdapter is delve's DAP server (dlv dap), which listens on TCP.
type delveAdapter struct{}

func (delveAdapter) Name() string        { return "delve" }
func (delveAdapter) Types() []string     { return []string{"go", "delve", "dlv"} }
func (delveAdapter) Languages() []string { return []string{"go", "golang"} }
func (delveAdapter) InstallHint() string {
	return "install delve matching your Go toolchain (go install github.com/go-delve/delve/cmd/dlv@latest)"
}

func (delveAdapter) Find(env *Env) (Command, error) {
	p := env.bestDelve()
	if p == "" {
		return Command{}, fmt.Errorf("no working dlv is on PATH")
	}
	return Command{Path: p, Args: []string{"dap", "--listen", "127.0.0.1:0"}, Listen: true}, nil
}

func (delveAdapter) Arguments(cfg map[string]any) map[string]any {
	if _, ok := cfg["mode"]; !ok {
		if cfg["request"] == "attach" {
			cfg["mode"] = "local"
		} else {
			cfg["mode"] = "debug"
		}
	}
	if p, ok := cfg["program"].(string); ok && cfg["mode"] == "exec" && !filepath.IsAbs(p) {
		cfg["program"] = "./" + p
	}
	delete(cfg, "console")
	return cfg
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
