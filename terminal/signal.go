//go:build !windows

package terminal

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/protocol"
)

// ParseSignal turns a signal name from a request into a signal: "SIGINT",
// "INT" and "sigint" all name SIGINT. Unknown names, numbers and empty
// input are an invalid_payload *protocol.Error.
func ParseSignal(name string) (syscall.Signal, error) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if n == "" {
		return 0, protocol.Errorf(protocol.CodeInvalidPayload, "signal is empty")
	}
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	if sig := unix.SignalNum(n); sig != 0 {
		return sig, nil
	}
	return 0, protocol.Errorf(protocol.CodeInvalidPayload, "unknown signal %q", name)
}
