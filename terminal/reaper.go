//go:build !windows

package terminal

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// A Manager kills what its commands started when it is closed. When the
// process holding it dies without Close (SIGKILL, OOM killer, a crash),
// nothing in it can run, so each Manager has a reaper: a small process of
// its own, started once, that learns over a pipe which sessions the
// Manager's commands lead (hidden commands and the visible shell). When
// the pipe reports end of file, the Manager's process is gone, whatever
// killed it, and the reaper ends every process still in those sessions
// (SIGHUP and SIGTERM, SIGKILL after reaperGrace) and exits.
//
// Why one reaper per Manager and not one per command: the reaper is this
// executable re-executed, and starting the tether binary (runtime and
// package initialisation of a 30 MB binary) takes about 7 ms, more than
// the whole budget of a hidden `true`. Registering a session is one
// write of a few bytes to a pipe.
//
// Why a pipe and not Pdeathsig: Pdeathsig is sent when the *thread* that
// forked the child exits, and Go may fork from any thread and ends a
// thread whenever a goroutine exits while locked to it. The pipe's write
// end closes only when the whole process is gone (it is close-on-exec, so
// commands never hold it). Commands keep Pdeathsig on their session
// leader only to cover the microseconds between fork and registration.
// macOS has no Pdeathsig, and the reaper is its whole answer there: the
// pipe, sessions and signals are plain Unix, and it finds the members of
// a session through proctree (sysctl and getsid) instead of /proc.

// ReaperCommand is the first argument that makes ReaperMain run the
// reaper instead of returning.
const ReaperCommand = "__reap"

// reaperGrace is how long the reaper gives orphaned commands between
// SIGTERM and SIGKILL.
const reaperGrace = 500 * time.Millisecond

// selfReaper is set by ReaperMain in a process that can serve as its own
// reaper, which makes this executable the default Config.Reaper.
var selfReaper atomic.Bool

// ReaperMain must be called first thing in main (and in a TestMain of
// tests that use a Manager) of a program that embeds this package. When
// the program was started as a Manager's reaper (os.Args[1] is
// ReaperCommand) it runs the reaper and exits; otherwise it returns at
// once and lets Managers use this executable as their reaper. A program
// that never calls it gets no reaper unless it sets Config.Reaper, and
// then commands can outlive a process killed without Close.
func ReaperMain() {
	if len(os.Args) > 1 && os.Args[1] == ReaperCommand {
		// Straight out: no exit hooks (a -race build would linger a second
		// in them while Close waits).
		syscall.Exit(runReaper(os.Stdin, reaperGrace))
	}
	selfReaper.Store(true)
}

// runReaper reads "+pid" and "-pid" lines from in, the sessions to watch
// and to forget, until end of file, then ends what is left in the watched
// sessions.
func runReaper(in io.Reader, grace time.Duration) int {
	// The reaper leads its own session; these could only come from
	// someone who means the Manager's process, not the reaper.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	watched := map[int]struct{}{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pid, err := strconv.Atoi(line[1:])
		if err != nil || pid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			watched[pid] = struct{}{}
		case '-':
			delete(watched, pid)
		}
	}
	if len(watched) == 0 {
		return 0
	}
	ids := make([]int, 0, len(watched))
	for id := range watched {
		ids = append(ids, id)
	}
	if signalSessions(ids, syscall.SIGHUP, syscall.SIGTERM) && !waitSessionsEmpty(ids, grace) {
		// Processes may still be forking: kill until none is left.
		for range 50 {
			if !signalSessions(ids, syscall.SIGKILL) || waitSessionsEmpty(ids, 20*time.Millisecond) {
				break
			}
		}
	}
	return 0
}

// signalSessions sends each of sigs to every process whose session or
// process group is one of ids, and reports whether there was any.
func signalSessions(ids []int, sigs ...syscall.Signal) bool {
	found := false
	for _, sig := range sigs {
		for _, id := range ids {
			if syscall.Kill(-id, sig) == nil {
				found = true
			}
		}
		for _, pid := range sessionMembers(ids...) {
			if syscall.Kill(pid, sig) == nil {
				found = true
			}
		}
	}
	return found
}

func waitSessionsEmpty(ids []int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for len(sessionMembers(ids...)) > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // polling /proc; there is no event for "session empty"
	}
	return true
}

// reaper is the Manager's side of its reaper process. watch and forget
// are safe for concurrent use: each is one write of less than PIPE_BUF
// bytes, which the kernel keeps whole.
type reaper struct {
	cmd    *exec.Cmd
	w      *os.File
	log    zerolog.Logger
	failed atomic.Bool
}

// reaperArgv is the command that runs cfg's reaper, or nil for none.
func reaperArgv(cfg Config) ([]string, error) {
	if cfg.Reaper != nil {
		return cfg.Reaper, nil
	}
	if !selfReaper.Load() {
		return nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable to run the reaper: %w", err)
	}
	return []string{exe, ReaperCommand}, nil
}

// startReaper starts argv as a reaper. It does not wait for it to be
// ready: what is written before it reads waits in the pipe.
func startReaper(argv []string, log zerolog.Logger) (*reaper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = r // stdout and stderr: /dev/null; nobody reads them once we are gone
	cmd.Dir = "/"
	// Its own session: a ^C or hangup meant for this process's group must
	// not end the reaper that outlives it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("starting the reaper %q: %w", argv[0], err)
	}
	return &reaper{cmd: cmd, w: w, log: log}, nil
}

// watch tells the reaper to end session id if this process dies.
func (rp *reaper) watch(id int) { rp.send('+', id) }

// forget tells the reaper that session id is over.
func (rp *reaper) forget(id int) { rp.send('-', id) }

func (rp *reaper) send(op byte, id int) {
	if rp == nil {
		return
	}
	b := strconv.AppendInt([]byte{op}, int64(id), 10)
	b = append(b, '\n')
	rc, err := rp.w.SyscallConn()
	if err == nil {
		// One non-blocking attempt: a reaper that stopped reading must
		// not hold up a command.
		werr := rc.Write(func(fd uintptr) bool {
			_, err = syscall.Write(int(fd), b)
			return true
		})
		if err == nil {
			err = werr
		}
	}
	if err != nil && rp.failed.CompareAndSwap(false, true) {
		rp.log.Warn().Err(err).Msg("the terminal's reaper is not listening; commands may outlive a killed bridge")
	}
}

// close tells the reaper this process is done and waits for it to exit.
// The Manager has ended its sessions by then, so it exits at once.
func (rp *reaper) close() {
	if rp == nil {
		return
	}
	_ = rp.w.Close()
	done := make(chan struct{})
	go func() { _ = rp.cmd.Wait(); close(done) }()
	t := time.NewTimer(reaperGrace + 2*time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = rp.cmd.Process.Kill()
		<-done
		rp.log.Warn().Msg("the terminal's reaper did not exit; killed it")
	}
	if st := rp.cmd.ProcessState; st != nil && !st.Success() {
		rp.log.Warn().Str("status", st.String()).Msg("the terminal's reaper failed")
	}
}
