//go:build unix

package rawnet_test

import (
	"testing"

	"github.com/tetherdev/tether/internal/tuning"
	"github.com/tetherdev/tether/internal/tuning/tuningtest"
)

// Connections read and written with the plain system calls (unix.Read and
// unix.Write: what TETHER_TUNING=no-rawnet gives on Linux, and what macOS
// always uses) pass the same tests as the raw ones.
func TestPlainSystemCallsPassTheSameTests(t *testing.T) {
	tuningtest.RerunWithout(t, tuning.RawNet,
		"TestListenerConnReadsWritesAndEndsAsATCPConn",
		"TestListenerServesHTTPKeepAlive",
		"TestTryWriteWritesWhatFitsWithoutWaiting",
		"TestDialCheckedHealthCheckTellsIdleFromDataFromClosed")
}
