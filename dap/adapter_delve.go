//go:build !windows

package dap

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
)

// delveAdapter is delve's DAP server (dlv dap), which listens on TCP.
//
// Its quirk: a remote attach (connect, or mode "remote" with host and
// port) is served by a headless delve that already runs the program
// (dlv exec|debug|attach --headless --accept-multiclient), which speaks DAP
// on its JSON-RPC port too: it is dialled (DialAddress), not started.
type delveAdapter struct{}

var _ dialer = delveAdapter{}

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
	return Command{Path: p, Args: []string{"dap", "--listen", "127.0.0.1:0"}, Listen: true}, nil
}

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
