//go:build unix

package eio

import (
	"testing"

	"github.com/tetherdev/tether/internal/tuning"
	"github.com/tetherdev/tether/internal/tuning/tuningtest"
)

// A sock over the plain system calls (what macOS always uses, and
// TETHER_TUNING=no-rawnet here) passes the same tests as over the raw ones.
func TestSockOverPlainSystemCallsPassesTheSameTests(t *testing.T) {
	tuningtest.RerunWithout(t, tuning.RawNet,
		"TestSockHoldsNoReadBufferOnceDrained",
		"TestSockReadOutlivesTheQuietDeadlineInAMessage",
		"TestSockCorkedWritesWaitForUncork",
		"TestSockWriteToAPeerThatDoesNotReadGivesUp",
		"TestSocketHijackerKeepsBytesReadPastTheRequest")
}
