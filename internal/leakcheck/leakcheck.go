//go:build !windows

// Package leakcheck tells whether a test binary left something behind once
// its tests ran: a goroutine (goleak), an open file descriptor, or a process
// it started, directly or not (a bridge's shell, a debug adapter's
// debuggee, a command that left its process group).
//
// Processes are found by a mark: Begin sets the environment variable MarkEnv
// in this process, every process started afterwards inherits it, and so do
// theirs, whatever their process group or parent becomes. Descriptors are
// compared with those open when Begin ran.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
//
// or, with something of the TestMain's own to stop first:
//
//	leaks := leakcheck.Begin()
//	stop := startMine()
//	code := m.Run()
//	stop()
//	os.Exit(leaks.After(code))
//
// Begin and Check must not run concurrently with each other; a Baseline is
// used by one goroutine.
package leakcheck

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tetherdev/tether/internal/proctree"
)

// MarkEnv is the environment variable that marks the processes a test
// binary started. Its value is a list of marks separated by "/", one per
// test binary above the process, so a test binary started by another one
// (a benchmark re-executing itself) marks its own children without hiding
// them from its parent's check.
const MarkEnv = "TETHER_LEAKCHECK"

// Wait bounds how long Check waits for what is still ending (a descriptor
// closed by a goroutine that is finishing, a process killed a moment ago).
const Wait = 10 * time.Second

// Baseline is what was open when Begin ran.
type Baseline struct {
	mark string
	fds  map[string]bool // "fd target" pairs
}

// Begin marks this process's environment for its future children and
// records the descriptors open now.
func Begin() *Baseline {
	mark := fmt.Sprintf("%d.%d", os.Getpid(), time.Now().UnixNano())
	value := mark
	if outer := os.Getenv(MarkEnv); outer != "" {
		value = outer + "/" + mark
	}
	_ = os.Setenv(MarkEnv, value)
	proctree.Prepare() // the process's own watchdog is no leak of the tests'
	return &Baseline{mark: mark, fds: openFDs()}
}

// Mark is this binary's own mark (a part of MarkEnv's value in its
// children).
func (b *Baseline) Mark() string { return b.mark }

// Processes lists the marked processes still running: "pid (command)".
func (b *Baseline) Processes() []string {
	var out []string
	for _, q := range proctree.WithEnv(MarkEnv, b.mark) {
		out = append(out, fmt.Sprintf("%d (%s)", q.Pid, q.Comm()))
	}
	return out
}

// FDs lists the descriptors open now that were not when Begin ran, as
// "fd -> target". The netpoller's own descriptors, which the Go runtime
// opens once on first use and keeps, are not leaks and are left out.
func (b *Baseline) FDs() []string {
	var out []string
	for pair := range openFDs() {
		if b.fds[pair] {
			continue
		}
		_, target, _ := strings.Cut(pair, " ")
		if runtimeFD(target) {
			continue
		}
		out = append(out, strings.Replace(pair, " ", " -> ", 1))
	}
	return out
}

// Check waits (up to wait) until no goroutine, descriptor or marked process
// is left beyond those at Begin, and returns what is still there. Marked
// processes still running at the end are killed, so that a failed run
// leaves nothing behind either. opts are passed to goleak.
func (b *Baseline) Check(wait time.Duration, opts ...goleak.Option) error {
	deadline := time.Now().Add(wait)
	var procs, fds []string
	for {
		procs, fds = b.Processes(), b.FDs()
		if (len(procs) == 0 && len(fds) == 0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // nothing signals that another process or a closing descriptor is gone
	}
	var errs []error
	if len(procs) > 0 {
		for _, q := range proctree.WithEnv(MarkEnv, b.mark) {
			_ = syscall.Kill(q.Pid, syscall.SIGKILL)
		}
		errs = append(errs, fmt.Errorf("%d processes left running (now killed): %s", len(procs), strings.Join(procs, ", ")))
	}
	if len(fds) > 0 {
		errs = append(errs, fmt.Errorf("%d file descriptors left open: %s", len(fds), strings.Join(fds, ", ")))
	}
	if err := goleak.Find(opts...); err != nil {
		errs = append(errs, fmt.Errorf("goroutines left running: %w", err))
	}
	return errors.Join(errs...)
}

// Main runs m's tests between Begin and After and returns the exit code.
func Main(m *testing.M, opts ...goleak.Option) int {
	b := Begin()
	return b.After(m.Run(), opts...)
}

// After is what follows m.Run in a TestMain that took its baseline with
// Begin (before starting anything of its own) and stopped what it started
// itself: given m.Run's exit code, it returns that code, or 1 if the tests
// passed but left something behind. A failed run is not checked (its
// cleanups may not all have run), only its marked processes are killed.
func (b *Baseline) After(code int, opts ...goleak.Option) int {
	if code != 0 {
		for _, q := range proctree.WithEnv(MarkEnv, b.mark) {
			_ = syscall.Kill(q.Pid, syscall.SIGKILL)
		}
		return code
	}
	if err := b.Check(Wait, opts...); err != nil {
		fmt.Fprintf(os.Stderr, "leakcheck: the tests passed but left something behind:\n%v\n", err)
		return 1
	}
	return 0
}
