//go:build !windows

package dap

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// delveAdapter is delve's DAP server (dlv dap), which listens on TCP.
//
// Its quirks: a remote attach (connect, or mode "remote" with host and
// port) is served by a headless delve that already runs the program
// (dlv exec|debug|attach --headless --accept-multiclient), which speaks DAP
// on its JSON-RPC port too: it is dialled (DialAddress), not started. And
// it builds the program with go build in its own working directory, so a
// program whose module lies in a subdirectory of the root fails to build
// ("go.mod file not found") unless delve runs in that module's root
// (workDir), as the VS Code Go extension runs it. Its restart request
// (delve 1.20) relaunches the program but leaves it halted with no stopped
// event, so restart relaunches it (restartRelauncher).
type delveAdapter struct{}

var (
	_ dialer            = delveAdapter{}
	_ workDirer         = delveAdapter{}
	_ restartRelauncher = delveAdapter{}
)

func (delveAdapter) relaunchOnRestart() {}

// DialAddress is the headless server of a remote attach.
func (delveAdapter) DialAddress(cfg map[string]any) string {
	if cfg["request"] != "attach" || cfg["mode"] != "remote" {
		return ""
	}
	port, ok := portNumber(cfg["port"])
	if !ok {
		return ""
	}
	host, _ := cfg["host"].(string)
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

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
	return Command{Path: p, Args: []string{"dap", "--listen", "127.0.0.1:0"}, Listen: true, Env: []string{noTelemetryChild}}, nil
}

// noTelemetryChild keeps a dlv built with Go's telemetry from starting its
// telemetry child: that child runs in a session of its own (setsid), so it
// escapes the adapter's process group, and it outlives a killed dlv for a
// moment, which the leak checks see as a process left behind. "2" is
// x/telemetry's "run by a child" value, under which Start does nothing.
const noTelemetryChild = "GO_TELEMETRY_CHILD=2"

func (delveAdapter) Arguments(cfg map[string]any) map[string]any {
	if c, ok := cfg["connect"].(map[string]any); ok && cfg["request"] == "attach" {
		delete(cfg, "connect")
		cfg["mode"] = "remote"
		cfg["host"], cfg["port"] = c["host"], c["port"]
	}
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

// workDir is the module root of a program delve builds (debug and test
// modes): the nearest directory with a go.mod, from the program's package
// directory upward; "" for exec and attach, or when there is no go.mod (the
// build's own error then says so).
func (delveAdapter) workDir(cfg map[string]any) string {
	p, _ := cfg["program"].(string)
	if cfg["request"] != "launch" || cfg["mode"] == "exec" || !filepath.IsAbs(p) {
		return ""
	}
	dir := p
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		dir = filepath.Dir(p)
	}
	return moduleRoot(dir)
}

// moduleRoot is the nearest directory at or above dir holding a go.mod, or "".
func moduleRoot(dir string) string {
	for {
		if fi, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !fi.IsDir() {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}
