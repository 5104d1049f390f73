package bench

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Every process a benchmark starts is a child in a process group of its
// own, registered here while it runs. Its own group keeps the terminal's
// Ctrl-C away from it (the signal goes to this process only, which stops the
// children in order) and lets a stop reach what the child started in turn.

// pidFileEnv, when set, names a file to which every started child's pid and
// name are appended, one "pid name" line each: TestPeersInterruptStopsEveryChild
// reads it to check that none is left after an interrupt.
const pidFileEnv = "TETHER_BENCH_PIDFILE"

// childGroupGrace bounds how long a group may take to empty once its leader
// is gone, and how long an interrupt waits after SIGTERM before SIGKILL.
const childGroupGrace = 5 * time.Second

// children is the registry of running children. Its lock is held across
// Start, so that an interrupt either sees a child or prevents its start.
var children struct {
	mu       sync.Mutex
	live     map[*proc]struct{}
	stopping bool // an interrupt is stopping everything: start nothing more
}

// startChild starts cmd in a process group of its own and registers p.
func startChild(cmd *exec.Cmd, p *proc) error {
	// Should this process die without its cleanups or its interrupt
	// handler, its children go too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	children.mu.Lock()
	defer children.mu.Unlock()
	if children.stopping {
		return fmt.Errorf("starting %s: interrupted", p.name)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	if children.live == nil {
		children.live = map[*proc]struct{}{}
	}
	children.live[p] = struct{}{}
	if path := os.Getenv(pidFileEnv); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%d %s\n", cmd.Process.Pid, p.name)
			_ = f.Close()
		}
	}
	return nil
}

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

// forgetChild removes p from the registry once it and its group are gone.
func forgetChild(p *proc) {
	children.mu.Lock()
	delete(children.live, p)
	children.mu.Unlock()
}

// signalGroup sends sig to every process in p's group.
func (p *proc) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid(), sig)
}

// reapGroup makes sure nothing is left in p's process group once p itself
// has exited: what is left is killed. It returns what it had to kill, for
// the report; "" when the group was empty.
func (p *proc) reapGroup() string {
	left := groupMembers(p.pid())
	if len(left) == 0 {
		return ""
	}
	p.signalGroup(syscall.SIGKILL)
	deadline := time.Now().Add(childGroupGrace)
	for len(groupMembers(p.pid())) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // no event tells that a non-child has exited
	}
	return strings.Join(left, ", ")
}

// groupMembers lists the live (not zombie) processes of process group pgid
// as "pid (command)", from /proc.
func groupMembers(pgid int) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgrp, comm, ok := procState(pid)
		if ok && pgrp == pgid && state != "Z" && state != "X" {
			out = append(out, fmt.Sprintf("%d (%s)", pid, comm))
		}
	}
	return out
}

// procState reads a process's state, process group and command name.
func procState(pid int) (state string, pgrp int, comm string, ok bool) {
	comm, f, ok := procStat(pid)
	if !ok || len(f) < 3 {
		return "", 0, "", false
	}
	pgrp, err := strconv.Atoi(f[2])
	return f[0], pgrp, comm, err == nil
}

// stopAllChildren stops every registered child and its group: SIGTERM to
// all, SIGKILL to what is left after childGroupGrace, and waits for them.
// No child can start afterwards. It returns how many it stopped.
func stopAllChildren() int {
	children.mu.Lock()
	children.stopping = true
	live := make([]*proc, 0, len(children.live))
	for p := range children.live {
		live = append(live, p)
	}
	children.mu.Unlock()
	for _, p := range live {
		p.signalGroup(syscall.SIGTERM)
	}
	deadline := time.After(childGroupGrace)
	for _, p := range live {
		select {
		case <-p.done:
		case <-deadline:
		}
	}
	for _, p := range live {
		p.signalGroup(syscall.SIGKILL)
		<-p.done // SIGKILL cannot be ignored
		_ = p.reapGroup()
		forgetChild(p)
	}
	return len(live)
}

// stopChildrenOnInterrupt installs the handler that, on SIGINT or SIGTERM to
// this process, stops every child (stopAllChildren) and exits with 128 plus
// the signal's number. The returned function removes the handler and waits
// for its goroutine.
func stopChildrenOnInterrupt() (remove func()) {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case sig := <-sigc:
			n := stopAllChildren()
			if childTemp != "" {
				_ = os.RemoveAll(childTemp)
			}
			fmt.Fprintf(os.Stderr, "bench: %v: stopped %d child processes and their groups\n", sig, n)
			os.Exit(128 + int(sig.(syscall.Signal)))
		case <-quit:
		}
	})
	return func() {
		signal.Stop(sigc)
		close(quit)
		wg.Wait()
	}
}
