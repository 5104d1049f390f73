package dap

import (
	"path/filepath"
	"strings"
)

// lldbInstallHint says how to get lldb-dap on this platform.
const lldbInstallHint = "install the Xcode command line tools (xcode-select --install), which provide lldb-dap, or Xcode itself"

// lldbElsewhere names where else findLLDBDAP looked.
const lldbElsewhere = ", and neither xcrun nor the command line tools' or Xcode's folders have lldb-dap"

// commandLineTools is where `xcode-select --install` puts the tools.
const commandLineTools = "/Library/Developer/CommandLineTools"

// platformLLDBDAP finds the lldb-dap of Apple's developer tools, which is
// not on PATH (only /usr/bin shims for some tools are): in the command
// line tools, then in the developer folder xcode-select names (Xcode's
// default toolchain), then as xcrun resolves it. xcrun runs only once
// xcode-select names a folder: without one, the /usr/bin/xcrun shim may
// offer to install the tools instead of answering.
func (e *Env) platformLLDBDAP() string {
	p, _ := e.memo(e.cache, "lldb-dap:xcode", func() (string, error) {
		candidates := []string{filepath.Join(commandLineTools, "usr/bin/lldb-dap")}
		dev, err := e.output("/usr/bin/xcode-select", "-p")
		dev = strings.TrimSpace(dev)
		if err == nil && filepath.IsAbs(dev) {
			candidates = append(candidates,
				filepath.Join(dev, "usr/bin/lldb-dap"),
				filepath.Join(dev, "Toolchains/XcodeDefault.xctoolchain/usr/bin/lldb-dap"))
		}
		for _, c := range candidates {
			if executable(c) {
				return c, nil
			}
		}
		if err != nil {
			return "", nil
		}
		out, err := e.output("/usr/bin/xcrun", "--find", "lldb-dap")
		if p := strings.TrimSpace(out); err == nil && filepath.IsAbs(p) && executable(p) {
			return p, nil
		}
		return "", nil
	})
	return p
}
