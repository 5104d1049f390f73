//go:build !windows

package dap

import (
	"fmt"
	"net"
	"strconv"
)

// debugpyAdapter is debugpy's adapter (python -m debugpy.adapter, through
// debugpyAdapterMain), over stdio,
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
	return Command{Path: py, Args: []string{"-c", debugpyAdapterMain}}, nil
}

// debugpyAdapterMain runs debugpy's adapter as `python3 -m debugpy.adapter`
// does, or the script named after it (a warm debugpy: debugpy_warm.py),
// with the adapter's socket reads acknowledging at once (TCP_QUICKACK).
// pydevd writes a message's header and body apart on a socket without
// TCP_NODELAY, so the body waited for the header's acknowledgement, which
// Linux delays by 40 ms: every request the adapter forwards to pydevd took
// about 45 ms (the four of a launch's handshake, the three of its
// configuration, a snapshot's stackTrace, scopes and variables, every
// step), and 1-8 ms with it (a script driving debugpy 1.6.3's adapter,
// docs/debugging.md "Where a warm Python start's time goes").
const debugpyAdapterMain = `import socket, sys
opt = getattr(socket, "TCP_QUICKACK", None)
if opt is not None:
    recv_into = socket.socket.recv_into
    def quick_recv_into(self, *args, **kwargs):
        try:
            self.setsockopt(socket.IPPROTO_TCP, opt, 1)
        except OSError:
            pass
        return recv_into(self, *args, **kwargs)
    socket.socket.recv_into = quick_recv_into
import importlib.util, runpy
if len(sys.argv) > 1:
    sys.argv[:] = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
else:
    sys.argv[0] = importlib.util.find_spec("debugpy.adapter.__main__").origin
    runpy.run_module("debugpy.adapter", run_name="__main__", alter_sys=False)
`

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
