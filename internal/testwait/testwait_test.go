package testwait_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/testwait"
)

type recorder struct{ failed string }

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	start := time.Now()
	var r recorder
	testwait.Until(&r, 5*time.Second, func() bool { return n.Add(1) >= 3 }, "three looks")
	if r.failed != "" {
		t.Fatalf("failed: %s", r.failed)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("took %s for three looks", el)
	}
}

func TestUntilFailsAtTheDeadlineNamingWhatItWaitedFor(t *testing.T) {
	var r recorder
	start := time.Now()
	testwait.Until(&r, 50*time.Millisecond, func() bool { return false }, "the %s", "thing")
	if el := time.Since(start); el < 50*time.Millisecond || el > 2*time.Second {
		t.Fatalf("gave up after %s, want about 50ms", el)
	}
	if r.failed != "timed out after 50ms waiting for: the thing" {
		t.Fatalf("failure %q", r.failed)
	}
}

func TestWithinLooksAtLeastOnce(t *testing.T) {
	if !testwait.Within(0, func() bool { return true }) {
		t.Fatal("a condition true at once was not seen with no time to wait")
	}
}
