package bench

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain doubles as the baseline echo server: the benchmarks re-execute
// this test binary with echoAddrEnv set to run it in a process of its own,
// as the broker runs in its own.
func TestMain(m *testing.M) {
	if addr := os.Getenv(echoAddrEnv); addr != "" {
		os.Exit(serveEcho(addr))
	}
	goleak.VerifyTestMain(m)
}
