//go:build !windows

// Package testproc runs the child processes of the e2e tests, the
// benchmarks, the chaos run and the soak: brokers, bridges, node clients.
//
// Every child runs in a process group of its own and is registered here
// while it runs. Its own group keeps a terminal's Ctrl-C away from it (the
// signal reaches the test binary only, which stops the children in order:
// OnInterrupt) and lets a stop reach what the child started in turn. It gets
// SIGKILL if the test binary dies without stopping it (proctree.Start:
// Pdeathsig on Linux, a watchdog on macOS).
//
// All functions and methods are safe for concurrent use.
package testproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// GroupGrace bounds how long a group may take to empty once its leader is
// gone, and how long StopAll waits after SIGTERM before SIGKILL.
const GroupGrace = 5 * time.Second

// PIDFileEnv, when set, names a file to which every started child's pid and
// name are appended, one "pid name" line each, so that a test can check
// from outside that none is left after an interrupt.
const PIDFileEnv = "TETHER_TESTPROC_PIDFILE"

// Proc is one running (or exited) child process.
type Proc struct {
	Name string
	// LogPath is the file its output goes to ("" if the caller set both
	// Stdout and Stderr).
	LogPath string
	cmd     *exec.Cmd

	done    chan struct{} // closed once Wait returned
	waitErr error
}

// children is the registry of running children. Its lock is held across
// Start, so that an interrupt either sees a child or prevents its start.
var children struct {
	mu       sync.Mutex
	live     map[*Proc]struct{}
	stopping bool // StopAll ran: start nothing more
}

// ErrStopping is returned by Start once StopAll ran.
var ErrStopping = errors.New("testproc: stopping every child, starting none")

// Start starts cmd as a child named name. Its stdout and stderr, where cmd
// leaves them nil, are appended to the file logPath. A goroutine owned by
// the returned Proc waits for it; it ends when the process exits.
func Start(name string, cmd *exec.Cmd, logPath string) (*Proc, error) {
	p := &Proc{Name: name, cmd: cmd, done: make(chan struct{})}
	if cmd.Stdout == nil || cmd.Stderr == nil {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening the log of %s: %w", name, err)
		}
		defer f.Close() // the child holds its own descriptor
		p.LogPath = logPath
		if cmd.Stdout == nil {
			cmd.Stdout = f
		}
		if cmd.Stderr == nil {
			cmd.Stderr = f
		}
	}
	children.mu.Lock()
	if children.stopping {
		children.mu.Unlock()
		return nil, fmt.Errorf("starting %s: %w", name, ErrStopping)
	}
	// Should the test binary die without stopping it, the child goes too.
	if err := proctree.Start(cmd); err != nil {
		children.mu.Unlock()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	if children.live == nil {
		children.live = map[*Proc]struct{}{}
	}
	children.live[p] = struct{}{}
	children.mu.Unlock()
	if path := os.Getenv(PIDFileEnv); path != "" {
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%d %s\n", cmd.Process.Pid, name)
			_ = f.Close()
		}
	}
	go func() {
		p.waitErr = cmd.Wait()
		proctree.Reaped(cmd.Process.Pid)
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's process id, which is also its process group's.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process exited and was waited for.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the process's exit error (nil for exit status 0); valid once Done
// is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.waitErr
}

// Kill crashes the process: SIGKILL to it alone, as a kill -9 would, and
// waits until it is gone. What it started stays as it left it; Reap or
// Stop ends the rest of its group.
func (p *Proc) Kill() {
	_ = syscall.Kill(p.Pid(), syscall.SIGKILL)
	<-p.done
}

// Signal sends sig to every process of the child's group.
func (p *Proc) Signal(sig syscall.Signal) { _ = syscall.Kill(-p.Pid(), sig) }

// Stop ends the process: SIGTERM to its group, SIGKILL after grace, waits
// for it, kills what is left of its group, and unregisters it. The error
// says what went wrong: it had exited before, exited badly after SIGTERM,
// needed SIGKILL, or left processes in its group. Stopping twice reports
// nothing the second time.
func (p *Proc) Stop(grace time.Duration) error {
	if !p.forget() {
		return nil
	}
	var errs []error
	if p.Exited() {
		errs = append(errs, fmt.Errorf("%s exited on its own: %v", p.Name, p.waitErr))
	} else {
		p.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.waitErr != nil {
				errs = append(errs, fmt.Errorf("%s exited badly after SIGTERM: %w", p.Name, p.waitErr))
			}
		case <-time.After(grace):
			p.Signal(syscall.SIGKILL)
			<-p.done
			errs = append(errs, fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.Name, grace))
		}
	}
	if left := p.Reap(); left != "" {
		errs = append(errs, fmt.Errorf("%s left processes in its group after exiting: %s (killed)", p.Name, left))
	}
	return errors.Join(errs...)
}

// Discard forgets a process that exited as expected (it lost the race for
// its port, or a test killed it on purpose): Stop no longer reports it.
// What is left of its group is killed.
func (p *Proc) Discard() {
	if p.forget() {
		_ = p.Reap()
	}
}

// forget unregisters p; false if it was not registered (any more).
func (p *Proc) forget() bool {
	children.mu.Lock()
	defer children.mu.Unlock()
	_, ok := children.live[p]
	delete(children.live, p)
	return ok
}

// Reap makes sure nothing is left in p's process group once p itself has
// exited: what is left is killed. It returns what it had to kill, for the
// report; "" when the group was empty.
func (p *Proc) Reap() string {
	defer proctree.Forget(p.Pid())
	left := Members(p.Pid())
	if len(left) == 0 {
		return ""
	}
	p.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(GroupGrace)
	for len(Members(p.Pid())) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // no event tells that a non-child has exited
	}
	return strings.Join(left, ", ")
}

// LogTail returns the last max bytes of the process's log, for failure
// messages.
func (p *Proc) LogTail(max int) string {
	if p.LogPath == "" {
		return "(" + p.Name + " has no log file)"
	}
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return fmt.Sprintf("--- %s output (tail) ---\n%s", p.Name, data)
}

// MemKB returns the process's resident set (VmRSS) and its peak (VmHWM).
func (p *Proc) MemKB() (rss, peak int64, err error) {
	return MemKB(p.Pid())
}

// MemKB returns the resident set (VmRSS) and its peak (VmHWM) of pid.
func MemKB(pid int) (rss, peak int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("reading the memory of %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parsing %s %q of %d: %w", k, v, pid, err)
		}
		if k == "VmRSS" {
			rss = n
		} else {
			peak = n
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("no VmRSS for %d", pid)
	}
	return rss, peak, sc.Err()
}

// FDs returns how many descriptors pid has open.
func FDs(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("listing the descriptors of %d: %w", pid, err)
	}
	return len(entries), nil
}

// CPUTime returns the CPU time (user + system) pid has used so far; 0 if
// it cannot be read.
func CPUTime(pid int) time.Duration {
	_, f, ok := Stat(pid)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	// USER_HZ is 100 on every Linux architecture Go supports.
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// Stat reads /proc/pid/stat: the command name, and the fields after it
// (fields[0] is the state, the third field of proc(5)).
func Stat(pid int) (comm string, fields []string, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, false
	}
	// The command name in parentheses may hold spaces; fields follow it.
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	return string(data[open+1 : end]), strings.Fields(string(data[end+1:])), true
}

// State reads a process's state, process group and command name.
func State(pid int) (state string, pgrp int, comm string, ok bool) {
	comm, f, ok := Stat(pid)
	if !ok || len(f) < 3 {
		return "", 0, "", false
	}
	pgrp, err := strconv.Atoi(f[2])
	return f[0], pgrp, comm, err == nil
}

// Members lists the live (not zombie) processes of process group pgid as
// "pid (command)".
func Members(pgid int) []string {
	var out []string
	for _, q := range proctree.Group(pgid) {
		if q.Running() {
			out = append(out, fmt.Sprintf("%d (%s)", q.Pid, q.Comm()))
		}
	}
	return out
}

// StopAll stops every registered child and its group: SIGTERM to all,
// SIGKILL to what is left after GroupGrace, and waits for them. No child
// can start afterwards. It returns how many it stopped.
func StopAll() int {
	children.mu.Lock()
	children.stopping = true
	live := make([]*Proc, 0, len(children.live))
	for p := range children.live {
		live = append(live, p)
	}
	children.live = nil
	children.mu.Unlock()
	for _, p := range live {
		p.Signal(syscall.SIGTERM)
	}
	deadline := time.After(GroupGrace)
	for _, p := range live {
		select {
		case <-p.done:
		case <-deadline:
		}
	}
	for _, p := range live {
		p.Signal(syscall.SIGKILL)
		<-p.done // SIGKILL cannot be ignored
		_ = p.Reap()
	}
	return len(live)
}

// OnInterrupt installs the handler that, on SIGINT or SIGTERM to this
// process, stops every child (StopAll), runs cleanup (which may be nil) and
// exits with 128 plus the signal's number. The returned function removes
// the handler and waits for its goroutine.
func OnInterrupt(what string, cleanup func()) (remove func()) {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case sig := <-sigc:
			n := StopAll()
			if cleanup != nil {
				cleanup()
			}
			fmt.Fprintf(os.Stderr, "%s: %v: stopped %d child processes and their groups\n", what, sig, n)
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

// TetherBin returns $TETHER_BIN (make sets it to bin/tether), or builds the
// binary into a temporary directory of tb's.
func TetherBin(tb testing.TB) string {
	tb.Helper()
	if bin := os.Getenv("TETHER_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			tb.Fatalf("TETHER_BIN: %v", err)
		}
		return bin
	}
	bin := filepath.Join(tb.TempDir(), "tether")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/tetherdev/tether/cmd/tether")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("building tether: %v\n%s", err, out)
	}
	return bin
}

// NodeClients returns the directory of the e2e node clients
// ($TETHER_E2E_CLIENTS, else e2e/clients of this checkout) once node and
// their node_modules are there; it skips tb without them, or fails it when
// the environment variable CI is set.
func NodeClients(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("TETHER_E2E_CLIENTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "e2e", "clients")
	}
	_, errNode := exec.LookPath("node")
	_, errMod := os.Stat(filepath.Join(dir, "node_modules", "socket.io-client"))
	if errNode != nil || errMod != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("node or socket.io-client missing (%v, %v): make deps installs them", errNode, errMod)
		}
		tb.Skipf("node or socket.io-client missing (%v, %v): run make deps", errNode, errMod)
	}
	return dir
}

// RaiseFileLimit raises this process's soft RLIMIT_NOFILE to its hard
// limit (children inherit it) and returns the limit now in force.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("raising RLIMIT_NOFILE: %w", err)
		}
	}
	return lim.Cur, nil
}
