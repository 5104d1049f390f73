package bench

import (
	"os"
	"testing"

	"github.com/tetherdev/tether/internal/testproc"
)

// Every process a benchmark starts is a child in a process group of its
// own (internal/testproc), registered while it runs; an interrupt stops
// them all (stopChildrenOnInterrupt).

// pidFileEnv, when set, names a file to which every started child's pid and
// name are appended, one "pid name" line each: TestPeersInterruptStopsEveryChild
// reads it to check that none is left after an interrupt.
const pidFileEnv = testproc.PIDFileEnv

// childTemp holds the children's logs and working directories. TestMain
// creates it and removes it when the run ends, and so does the interrupt
// handler: an interrupted run leaves no files behind (t.TempDir's are only
// removed by cleanups, which an interrupt skips).
var childTemp string

// childDir returns a new directory under childTemp for a child's files,
// removed when tb ends.
func childDir(tb testing.TB, name string) string {
	tb.Helper()
	if childTemp == "" {
		return tb.TempDir()
	}
	dir, err := os.MkdirTemp(childTemp, name+"-")
	if err != nil {
		tb.Fatalf("creating a directory for %s: %v", name, err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// groupMembers lists the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []string { return testproc.Members(pgid) }

// procState reads a process's state, process group and command name.
func procState(pid int) (state string, pgrp int, comm string, ok bool) { return testproc.State(pid) }

// stopChildrenOnInterrupt installs the handler that, on SIGINT or SIGTERM to
// this process, stops every child and its group, removes childTemp, and
// exits with 128 plus the signal's number. The returned function removes
// the handler and waits for its goroutine.
func stopChildrenOnInterrupt() (remove func()) {
	return testproc.OnInterrupt("bench", func() {
		if childTemp != "" {
			_ = os.RemoveAll(childTemp)
		}
	})
}
