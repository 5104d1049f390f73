//go:build !windows

package dap

import (
	"fmt"
	"path/filepath"
)

// delveAdapter is delve's DAP server (dlv dap), which listens on TCP.
//
// Its quirk: its restart request (delve 1.20) relaunches the program but
// leaves it halted with no stopped event, so restart relaunches it
// (restartRelauncher).
type delveAdapter struct{}

var _ restartRelauncher = delveAdapter{}

func (delveAdapter) relaunchOnRestart() {}

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
