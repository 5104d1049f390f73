package bench

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain doubles as the baseline echo server: the benchmarks re-execute
// this test binary with echoAddrEnv set to run it in a process of its own,
// as the broker runs in its own.
//
// While the tests and benchmarks run, SIGINT or SIGTERM stops every child
// process and its group before this process exits (children_test.go). After
// them, a goroutine left running fails the run.
func TestMain(m *testing.M) {
	if addr := os.Getenv(echoAddrEnv); addr != "" {
		os.Exit(serveEcho(addr))
	}
	removeHandler := stopChildrenOnInterrupt()
	code := m.Run()
	removeHandler()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
