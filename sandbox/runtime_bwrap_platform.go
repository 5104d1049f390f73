//go:build !windows

package sandbox

import "github.com/tetherdev/tether/protocol"

// bwrapOn answers whether bubblewrap can run on the platform goos at all:
// nil on Linux (whether it can on this machine is probed next); elsewhere
// runtime_unavailable saying why. bwrap is built on Linux namespaces
// (user, mount, PID, network), which macOS does not have; the subprocess
// runtime is what runs there.
func bwrapOn(goos string) error {
	if goos == "linux" {
		return nil
	}
	return protocol.Errorf(protocol.CodeRuntimeUnavailable,
		"the bwrap runtime needs Linux namespaces, and this bridge runs on %s; ask for runtime subprocess", goos)
}
