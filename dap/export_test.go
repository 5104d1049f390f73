//go:build !windows

package dap

// XcodeLLDBDAP runs the macOS lldb-dap search over a fake tree: the
// command line tools' folder, and fake xcode-select and xcrun programs.
func (e *Env) XcodeLLDBDAP(commandLineTools, xcodeSelect, xcrun string) string {
	return e.xcodeLLDBDAP(xcodeTools{commandLineTools, xcodeSelect, xcrun})
}
