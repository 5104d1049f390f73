// Package testwait is the one way tests wait for something to become true:
// Until polls a condition with a deadline and fails the test, naming what
// it waited for, when the deadline passes first. Use it where no event can
// be awaited directly (a counter in /metrics, a process that ends on its
// own time); where one can (a channel, a response), wait on that instead,
// and where time itself is the subject, use testing/synctest.
package testwait

import (
	"fmt"
	"time"
)

// TB is the part of testing.TB that Until uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Every is how often Until looks at its condition.
const Every = 5 * time.Millisecond

// Until waits until cond returns true, looking every Every, for at most
// timeout; past it the test fails with "timed out after D waiting for: "
// and what (formatted with args). It returns as soon as cond holds, having
// looked at least once.
func Until(t TB, timeout time.Duration, cond func() bool, what string, args ...any) {
	t.Helper()
	if !Within(timeout, cond) {
		t.Fatalf("timed out after %s waiting for: %s", timeout, fmt.Sprintf(what, args...))
	}
}

// Within is Until without a test: it reports whether cond held within
// timeout. For a wait whose failure is not fatal, or is reported
// otherwise.
func Within(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(Every, time.Until(deadline)+time.Millisecond))
	}
}
