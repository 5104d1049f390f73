//go:build !windows

package dap

import (
	"fmt"
	"os"
	"path/filepath"
)

// delveAdapter is delve's DAP server (dlv dap), which listens on TCP.
//
// Its quirk: it builds the program with go build in its own working
// directory, so a program whose module lies in a subdirectory of the root
// fails to build ("go.mod file not found") unless delve runs in that
// module's root (workDir), as the VS Code Go extension runs it.
type delveAdapter struct{}

var _ workDirer = delveAdapter{}

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
