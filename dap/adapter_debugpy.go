//go:build !windows

package dap

import (
	"fmt"
	"net"
	"strconv"
)

// debugpyAdapter is debugpy's adapter (python -m debugpy.adapter), over stdio,
// run by the Python interpreter that can import debugpy.
//
// Its quirk: an attach by "connect" is served by the adapter that
// debugpy.listen() started inside the debuggee, so it is dialled
// (DialAddress) instead of started.
type debugpyAdapter struct{}

var _ dialer = debugpyAdapter{}

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
