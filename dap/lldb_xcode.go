//go:build !windows

package dap

import (
	"path/filepath"
	"strings"
)

// xcodeTools is where Apple's developer tools are found: the command
// line tools' folder, and the programs that name the active developer
// folder and resolve a tool in it. appleTools (lldb_find_darwin.go) is
// macOS's; tests use a fake tree, which is how this file runs on Linux.
type xcodeTools struct {
	commandLineTools, xcodeSelect, xcrun string
}

// xcodeLLDBDAP finds the lldb-dap of Apple's developer tools, which is
// not on PATH: in the command line tools, then in the developer folder
// xcode-select names (Xcode's own, and its default toolchain), then as
// xcrun resolves it. xcrun runs only once xcode-select names a folder:
// without one, macOS's xcrun shim may offer to install the tools instead
// of answering. "" if none.
func (e *Env) xcodeLLDBDAP(t xcodeTools) string {
	candidates := []string{filepath.Join(t.commandLineTools, "usr/bin/lldb-dap")}
	dev, err := e.output(t.xcodeSelect, "-p")
	dev = lastPath(dev)
	named := err == nil && dev != ""
	if named {
		candidates = append(candidates,
			filepath.Join(dev, "usr/bin/lldb-dap"),
			filepath.Join(dev, "Toolchains/XcodeDefault.xctoolchain/usr/bin/lldb-dap"))
	}
	for _, c := range candidates {
		if executable(c) {
			return c
		}
	}
	if !named {
		return ""
	}
	out, err := e.output(t.xcrun, "--find", "lldb-dap")
	if p := lastPath(out); err == nil && p != "" && executable(p) {
		return p
	}
	return ""
}

// lastPath is the last line of out that is an absolute path: the answer
// of xcode-select or xcrun, whose output here has their warnings (on
// stderr) mixed in.
func lastPath(out string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if p := strings.TrimSpace(lines[i]); filepath.IsAbs(p) {
			return p
		}
	}
	return ""
}
