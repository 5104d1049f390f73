//go:build !linux && !windows

package sandbox

import (
	"runtime"

	"github.com/tetherdev/tether/protocol"
)

// bwrapPlatform answers why bubblewrap cannot run on this platform: it is
// built on Linux namespaces (user, mount, PID, network), which macOS does
// not have. The subprocess runtime is what runs here.
func bwrapPlatform() error {
	return protocol.Errorf(protocol.CodeRuntimeUnavailable,
		"the bwrap runtime needs Linux namespaces, and this bridge runs on %s; ask for runtime subprocess", runtime.GOOS)
}
