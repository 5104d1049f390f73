//go:build !windows

package bridge_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: every
// goroutine the bridge starts must have ended when Run returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
