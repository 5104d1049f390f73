package bench

import (
	"fmt"
	"os"
	"testing"

	"github.com/tetherdev/tether/internal/leakcheck"
)

// TestMain doubles as the baseline echo server: the benchmarks re-execute
// this test binary with echoAddrEnv set to run it in a process of its own,
// as the broker runs in its own.
//
// While the tests and benchmarks run, SIGINT or SIGTERM stops every child
// process and its group, and removes their files, before this process exits
// (children_test.go). After them, a goroutine, file descriptor or process
// left behind fails the run (internal/leakcheck).
func TestMain(m *testing.M) {
	if addr := os.Getenv(echoAddrEnv); addr != "" {
		os.Exit(serveEcho(addr))
	}
	leaks := leakcheck.Begin()
	var err error
	if childTemp, err = os.MkdirTemp("", "tether-bench-"); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
	removeHandler := stopChildrenOnInterrupt()
	code := m.Run()
	removeHandler()
	_ = os.RemoveAll(childTemp)
	os.Exit(leaks.After(code))
}
