//go:build !windows

package terminal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/termios"
)

// shellStartTimeout bounds how long a new visible shell may take to run
// its setup line and report ready.
const shellStartTimeout = 10 * time.Second

// The setup line typed into a new shell. Prompts are empty (tether draws
// its own in the transcript) and the prompt hook prints the completion
// marker with the nonce of the line that just ran and that line's status.
// The hook prefers __tether_ec, which the run file sets, over $?, so a
// PROMPT_COMMAND a command prepends cannot change the reported status.
// The marker goes to /dev/tty so a command's `exec >file` cannot hide it.
const shellSetup = ` PS1=''; PS2=''; PS0=''; HISTCONTROL=ignorespace; unset HISTFILE; ` +
	`set -o ignoreeof; IGNOREEOF=1000; ` +
	`__tether_pc() { local ec=$?; [[ -n $__tether_ec ]] && ec=$__tether_ec; ` +
	`printf '\033]633;D;%s;%s\007' "$__tether_nonce" "$ec" >/dev/tty 2>/dev/null || ` +
	`printf '\033]633;D;%s;%s\007' "$__tether_nonce" "$ec"; ` +
	`__tether_nonce=; __tether_ec=; PS1=''; PS2=''; }; PROMPT_COMMAND=__tether_pc; `

// shell is one interactive bash on a PTY: the visible terminal. The
// reader goroutine owns the scanner; fields marked vt are guarded by the
// Manager's vt.mu.
type shell struct {
	m          *Manager
	cmd        *exec.Cmd
	pty        *os.File
	pid        int
	base       unix.Termios
	scan       sentinelScanner
	readyNonce string
	ready      chan struct{} // closed when the setup line's marker arrives
	exited     chan struct{} // closed when bash has been reaped
	readerDone chan struct{}
	wsem       chan struct{} // one writer at a time

	current     *visibleCmd // vt
	dead        bool        // vt
	isReady     bool        // vt
	resetReason string      // vt
}

// startShell starts a visible shell in the root and waits until it is
// ready. The caller holds vt.busy.
func (m *Manager) startShell(ctx context.Context) (*shell, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("opening a pty: %w", err)
	}
	_ = pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 160})
	base, err := baselineMode(tty)
	if err != nil {
		closeAll(ptmx, tty)
		return nil, fmt.Errorf("setting the pty mode: %w", err)
	}
	cmd := exec.Command(m.bash, "--noprofile", "--norc", "--noediting", "-i")
	cmd.Dir = m.root
	cmd.Env = mergeEnv(mergeEnv(os.Environ(), platformShellEnv), map[string]string{
		// Plain output for the agent, no pager waiting for a key.
		"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat",
		"SYSTEMD_PAGER": "cat", "PROMPT_COMMAND": "", "PS1": "",
	})
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// An interactive bash passes SIGHUP on to its jobs before exiting,
	// but not to a command running from a sourced file, which is how
	// agent commands run: the reaper ends those if this process dies.
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}, syscall.SIGHUP)
	err = cmd.Start()
	_ = tty.Close()
	if err != nil {
		_ = ptmx.Close()
		return nil, fmt.Errorf("starting %s: %w", m.bash, err)
	}
	m.reap.watch(cmd.Process.Pid)
	sh := &shell{
		m: m, cmd: cmd, pty: ptmx, pid: cmd.Process.Pid, base: base,
		readyNonce: newNonce(),
		ready:      make(chan struct{}), exited: make(chan struct{}),
		readerDone: make(chan struct{}), wsem: make(chan struct{}, 1),
	}
	m.vt.mu.Lock()
	closed := m.isClosed()
	if !closed {
		m.vt.sh = sh
	}
	m.vt.mu.Unlock()
	if closed || !m.spawn(sh.run) {
		m.vt.mu.Lock()
		if m.vt.sh == sh {
			m.vt.sh = nil
		}
		m.vt.mu.Unlock()
		_ = syscall.Kill(-sh.pid, syscall.SIGKILL)
		_ = cmd.Wait()
		m.reap.forget(sh.pid)
		_ = ptmx.Close()
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, shellStartTimeout)
	defer cancel()
	n1, n2 := sh.readyNonce[:len(sh.readyNonce)/2], sh.readyNonce[len(sh.readyNonce)/2:]
	err = sh.write(ctx, []byte(shellSetup+"__tether_nonce="+n1+`""`+n2+"\n"))
	if err == nil {
		select {
		case <-sh.ready:
			m.log.Info().Int("pid", sh.pid).Msg("visible terminal started")
			return sh, nil
		case <-sh.exited:
			err = errors.New("the shell exited during setup")
		case <-ctx.Done():
			err = fmt.Errorf("waiting for the shell to start: %w", ctx.Err())
		}
	}
	sh.reset("the shell failed to start")
	return nil, err
}

// baselineMode sets the terminal mode every command starts from: no
// echo, so what tether types never shows up as output (the transcript
// shows the command instead), and no \n to \r\n translation, so results
// carry the bytes programs wrote.
func baselineMode(tty *os.File) (unix.Termios, error) {
	var t unix.Termios
	err := control(tty, func(fd int) error {
		cur, err := termios.Get(fd)
		if err != nil {
			return err
		}
		cur.Lflag &^= unix.ECHO | unix.ECHONL
		cur.Lflag |= unix.ICANON | unix.ISIG | unix.IEXTEN
		cur.Oflag &^= unix.ONLCR
		cur.Iflag |= unix.ICRNL
		t = *cur
		return termios.Set(fd, cur)
	})
	return t, err
}

// control runs f on f's descriptor without switching it to blocking mode
// the way File.Fd does.
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// restoreMode puts the terminal back in the baseline mode; a command may
// have left it raw or echoing. On a PTY master the mode set is the slave's.
func (sh *shell) restoreMode() {
	_ = control(sh.pty, func(fd int) error {
		t := sh.base
		return termios.Set(fd, &t)
	})
}

// canonicalSilent reports whether the terminal is in the canonical, non-echoing
// mode tether keeps it in, where nothing shows what a person types.
func (sh *shell) canonicalSilent() bool {
	ok := false
	_ = control(sh.pty, func(fd int) error {
		t, err := termios.Get(fd)
		if err == nil {
			ok = t.Lflag&unix.ICANON != 0 && t.Lflag&unix.ECHO == 0
		}
		return err
	})
	return ok
}

// foreground returns the terminal's foreground process group: the job
// running now, or the shell itself between jobs and during builtins.
func (sh *shell) foreground() int {
	pg := 0
	_ = control(sh.pty, func(fd int) error {
		v, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		pg = v
		return err
	})
	return pg
}

// signalForeground sends sig to the foreground job; to the shell itself
// only when toShell is set.
func (sh *shell) signalForeground(sig syscall.Signal, toShell bool) bool {
	pg := sh.foreground()
	if pg <= 0 || (pg == sh.pid && !toShell) {
		return false
	}
	return syscall.Kill(-pg, sig) == nil
}

// cwd is the shell's current directory, which `cd` in a command changes.
func (sh *shell) cwd() string { return proctree.Cwd(sh.pid) }

// write types p into the terminal, one writer at a time, giving up when
// ctx ends or the shell exits.
func (sh *shell) write(ctx context.Context, p []byte) error {
	select {
	case sh.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-sh.exited:
		return errGone
	}
	defer func() { <-sh.wsem }()
	stop := watchWriteDeadline(ctx, sh.pty)
	_, err := sh.pty.Write(p)
	stop()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// reset kills the shell and everything in its session. The wait loop
// then ends the current command with reason and the next visible command
// starts a new shell.
func (sh *shell) reset(reason string) {
	sh.m.vt.mu.Lock()
	if sh.resetReason == "" {
		sh.resetReason = reason
	}
	sh.m.vt.mu.Unlock()
	sh.m.log.Warn().Int("pid", sh.pid).Str("reason", reason).Msg("resetting visible terminal")
	signalSession(sh.pid, syscall.SIGKILL)
}

func (sh *shell) readLoop() {
	defer close(sh.readerDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := sh.pty.Read(buf)
		if n > 0 {
			sh.m.feed(sh, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// run owns the shell's goroutines: it reads the PTY until bash is gone,
// ends the jobs bash left, and reports the shell gone.
func (sh *shell) run() {
	go sh.readLoop()
	_ = sh.cmd.Wait()
	code := exitStatus(sh.cmd.ProcessState)
	close(sh.exited)
	terminateSession(context.Background(), sh.pid, sh.m.cfg.KillGrace, syscall.SIGHUP, syscall.SIGTERM)
	sh.m.reap.forget(sh.pid)
	t := time.NewTimer(drainTimeout)
	select {
	case <-sh.readerDone:
	case <-t.C:
		// Something outside the session holds the terminal open.
		_ = sh.pty.Close()
		<-sh.readerDone
	}
	t.Stop()
	_ = sh.pty.Close()
	sh.m.shellGone(sh, code)
}
