package dap

// lldbInstallHint says how to get lldb-dap on this platform.
const lldbInstallHint = "install the Xcode command line tools (xcode-select --install), which provide lldb-dap, or Xcode itself"

// lldbElsewhere names where else findLLDBDAP looked.
const lldbElsewhere = ", and neither xcrun nor the command line tools' or Xcode's folders have lldb-dap"

// appleTools: `xcode-select --install` puts the command line tools in
// /Library/Developer/CommandLineTools; /usr/bin holds xcode-select and
// xcrun on every macOS.
var appleTools = xcodeTools{
	commandLineTools: "/Library/Developer/CommandLineTools",
	xcodeSelect:      "/usr/bin/xcode-select",
	xcrun:            "/usr/bin/xcrun",
}

// platformLLDBDAP finds the lldb-dap of Apple's developer tools, once per
// Env.
func (e *Env) platformLLDBDAP() string {
	p, _ := e.memo(e.cache, "lldb-dap:xcode", func() (string, error) {
		return e.xcodeLLDBDAP(appleTools), nil
	})
	return p
}
