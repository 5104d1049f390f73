//go:build !windows

package terminal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// visibleTerminal is the Manager's named terminal: at most one shell,
// running at most one agent command at a time. All fields are guarded by
// mu, as are the vt-marked fields of the shell; mu is never held across
// I/O, and is taken before a session's or the Manager's own mutex.
type visibleTerminal struct {
	mu sync.Mutex
	sh *shell
	// busy is held by the agent command running in the terminal, or by
	// the caller starting a shell.
	busy bool
	// humanBusy is set while a line a person typed (tether attach
	// --write) runs; the prompt's marker clears it.
	humanBusy  bool
	subs       map[chan []byte]struct{}
	transcript *ring
	lastByte   byte
}

// visibleCmd is a command typed into the visible shell. It ends when the
// prompt hook prints its nonce, or when the shell dies.
type visibleCmd struct {
	m     *Manager
	sh    *shell
	s     *session
	nonce string
	files []string
	// started is a file the typed line creates once bash runs it (after
	// setting the nonce): before that, a signal would make bash drop the
	// line unread and the command would never report its end.
	started string

	mu          sync.Mutex
	partialLine bool // input typed since the last newline
	once        sync.Once
}

var _ runner = (*visibleCmd)(nil)

// runVisible starts s in the visible shell if it is free, starting the
// shell if needed. Otherwise it returns false and why, and the caller
// runs s hidden.
func (m *Manager) runVisible(ctx context.Context, s *session, sp spec) (bool, string) {
	vt := &m.vt
	vt.mu.Lock()
	switch {
	case vt.busy:
		vt.mu.Unlock()
		return false, "the visible terminal was busy with another command, so this one ran as a hidden process"
	case vt.humanBusy:
		vt.mu.Unlock()
		return false, "the visible terminal was busy with a command typed into it, so this one ran as a hidden process"
	}
	vt.busy = true
	sh := vt.sh
	if sh != nil && sh.dead {
		sh = nil
	}
	vt.mu.Unlock()

	if sh == nil {
		var err error
		if sh, err = m.startShell(ctx); err != nil {
			m.releaseTerminal()
			return false, fmt.Sprintf("the visible terminal could not start (%v), so this command ran as a hidden process", err)
		}
	}
	cwd := sp.cwd
	if cwd == "" {
		cwd = sh.cwd()
	}
	vc, line, err := m.prepareVisible(sh, s, sp)
	if err != nil {
		m.releaseTerminal()
		return false, fmt.Sprintf("preparing the visible terminal failed (%v), so this command ran as a hidden process", err)
	}
	vt.mu.Lock()
	if sh.dead {
		vt.mu.Unlock()
		vc.removeFiles()
		m.releaseTerminal()
		return false, "the visible terminal exited, so this command ran as a hidden process"
	}
	s.terminal, s.cwd = TerminalVisible, cwd
	s.setRunner(vc, 0)
	sh.current = vc
	m.broadcastLocked([]byte(promptLine(vt.lastByte, cwd, sp.command)))
	vt.mu.Unlock()

	sh.restoreMode()
	if err := sh.write(ctx, []byte(line)); err != nil {
		sh.reset("typing the command into the visible terminal failed: " + err.Error())
	}
	return true, ""
}

// prepareVisible writes the command (and, for cwd or env, a wrapper) to
// files the shell sources, and returns the line to type. Sourcing keeps
// `cd` and `export` in the shell, turns an unfinished quote into a syntax
// error instead of a continuation prompt, and keeps long commands clear
// of the terminal's line limit. The nonce is typed in two quoted halves,
// so the typed text can never read as the marker the hook prints.
func (m *Manager) prepareVisible(sh *shell, s *session, sp spec) (*visibleCmd, string, error) {
	vc := &visibleCmd{m: m, sh: sh, s: s, nonce: newNonce()}
	base := filepath.Join(m.dir, s.id)
	write := func(suffix, text string) (string, error) {
		p := base + suffix
		vc.files = append(vc.files, p)
		return p, os.WriteFile(p, []byte(text), 0o600)
	}
	run, err := write(".cmd", sp.command+"\n")
	if err != nil {
		vc.removeFiles()
		return nil, "", err
	}
	if sp.cwd != "" || len(sp.env) > 0 {
		var b strings.Builder
		if sp.cwd != "" {
			// A cwd given with the call holds for this command only, unless
			// the command itself changes directory.
			fmt.Fprintf(&b, "__tether_prev=$PWD\nbuiltin cd -- %s || return\n", shellQuote(sp.cwd))
		}
		if len(sp.env) == 0 {
			fmt.Fprintf(&b, "builtin source %s\n__tether_ec=$?\n", shellQuote(run))
		} else {
			// local -x exports to the command's children and is undone when
			// the function returns, even when ^C aborts it.
			names := make([]string, 0, len(sp.env))
			for k := range sp.env {
				names = append(names, k)
			}
			slices.Sort(names)
			b.WriteString("__tether_env() { local -x")
			for _, k := range names {
				fmt.Fprintf(&b, " %s=%s", k, shellQuote(sp.env[k]))
			}
			fmt.Fprintf(&b, "; builtin source %s; }\n__tether_env\n__tether_ec=$?\nbuiltin unset -f __tether_env\n", shellQuote(run))
		}
		if sp.cwd != "" {
			fmt.Fprintf(&b, "[[ $PWD == %s ]] && builtin cd -- \"$__tether_prev\"\n", shellQuote(sp.cwd))
		}
		b.WriteString("return $__tether_ec\n")
		if run, err = write(".run", b.String()); err != nil {
			vc.removeFiles()
			return nil, "", err
		}
	}
	redirect := " </dev/null"
	switch {
	case sp.stdin != nil:
		in, err := write(".stdin", *sp.stdin)
		if err != nil {
			vc.removeFiles()
			return nil, "", err
		}
		redirect = " <" + shellQuote(in)
	case sp.async:
		redirect = "" // the terminal: Input types into it
	}
	n1, n2 := vc.nonce[:len(vc.nonce)/2], vc.nonce[len(vc.nonce)/2:]
	vc.started = base + ".started"
	vc.files = append(vc.files, vc.started)
	// ^U first discards anything a person left half-typed. ": >file" marks
	// the start without a fork.
	line := "\x15 __tether_ec=; [[ $PROMPT_COMMAND == __tether_pc* ]] || PROMPT_COMMAND=\"__tether_pc;$PROMPT_COMMAND\"; " +
		"__tether_nonce=" + n1 + `""` + n2 + "; : >" + shellQuote(vc.started) + "; builtin source " + shellQuote(run) + redirect + "\n"
	return vc, line, nil
}

// promptLine is what the transcript shows for a command the agent ran.
func promptLine(last byte, cwd, command string) string {
	var b strings.Builder
	if last != '\n' && last != 0 {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "tether:%s$ ", cwd)
	b.WriteString(strings.ReplaceAll(strings.TrimRight(command, "\n"), "\n", "\n> "))
	b.WriteByte('\n')
	return b.String()
}

func (m *Manager) releaseTerminal() {
	m.vt.mu.Lock()
	m.vt.busy = false
	m.vt.mu.Unlock()
}

// feed handles bytes read from a shell's PTY.
func (m *Manager) feed(sh *shell, p []byte) {
	var finished []func()
	vt := &m.vt
	vt.mu.Lock()
	sh.scan.feed(p, func(b []byte) { m.dataLocked(sh, b) }, func(mk marker) {
		switch {
		case sh.current != nil && mk.nonce == sh.current.nonce:
			vc := sh.current
			sh.current = nil
			vt.busy = false
			finished = append(finished, func() { vc.finish(mk.code, "") })
		case mk.nonce == sh.readyNonce && !sh.isReady:
			sh.isReady = true
			close(sh.ready)
		case mk.nonce == "":
			// The prompt after a line a person typed.
			if vt.sh == sh {
				vt.humanBusy = false
			}
		default:
			// Not ours: a command printed something marker-shaped.
			m.dataLocked(sh, mk.raw)
		}
	})
	vt.mu.Unlock()
	for _, f := range finished {
		f()
	}
}

// dataLocked routes output to the running command and the transcript.
// Bytes before the shell is ready are its start-up prompt, dropped.
func (m *Manager) dataLocked(sh *shell, b []byte) {
	if !sh.isReady {
		return
	}
	if sh.current != nil {
		sh.current.s.writeOut(b)
	}
	m.broadcastLocked(b)
}

// shellGone is called once per shell after bash has been reaped and its
// output drained. A command still running in it ends with the shell's
// status.
func (m *Manager) shellGone(sh *shell, code int) {
	vt := &m.vt
	vt.mu.Lock()
	sh.scan.flush(func(b []byte) { m.dataLocked(sh, b) })
	sh.dead = true
	if vt.sh == sh {
		vt.sh = nil
		vt.humanBusy = false
	}
	vc := sh.current
	sh.current = nil
	if vc != nil {
		vt.busy = false
	}
	reason := sh.resetReason
	if reason == "" {
		reason = fmt.Sprintf("the visible terminal's shell exited with status %d; the next command starts a new one", code)
	}
	if sh.isReady {
		m.broadcastLocked([]byte(promptNote(vt.lastByte, reason)))
	}
	vt.mu.Unlock()
	m.log.Info().Int("pid", sh.pid).Int("exit_code", code).Str("reason", reason).Msg("visible terminal exited")
	if vc != nil {
		vc.finish(code, reason)
	}
}

func promptNote(last byte, note string) string {
	s := "[tether] " + note + "\n"
	if last != '\n' && last != 0 {
		s = "\n" + s
	}
	return s
}

func (vc *visibleCmd) finish(code int, note string) {
	vc.s.finish(code, note)
	vc.removeFiles()
}

func (vc *visibleCmd) removeFiles() {
	for _, f := range vc.files {
		_ = os.Remove(f)
	}
}

// stop interrupts the command the way a person would, escalating: ^C
// (SIGINT to the foreground job, which also ends a loop the shell runs),
// then SIGTERM, then SIGKILL and a terminal mode reset, and finally a new
// shell, each step a KillGrace apart.
func (vc *visibleCmd) stop() {
	vc.once.Do(func() {
		// During Close the spawn is refused; Close kills the shell.
		vc.m.spawn(vc.escalate)
	})
}

func (vc *visibleCmd) escalate() {
	sh := vc.sh
	steps := []func(){
		func() { sh.signalForeground(syscall.SIGINT, true) },
		func() {
			sh.signalForeground(syscall.SIGTERM, false)
			sh.signalForeground(syscall.SIGINT, true)
		},
		func() {
			sh.signalForeground(syscall.SIGKILL, false)
			sh.restoreMode()
		},
		func() {
			sh.reset("the command did not stop when interrupted, so the visible terminal was restarted; its working directory and environment are back to the start")
		},
	}
	for _, step := range steps {
		if vc.s.isDone() {
			return
		}
		step()
		t := time.NewTimer(vc.m.cfg.KillGrace)
		select {
		case <-vc.s.done:
		case <-vc.m.closing:
		case <-t.C:
		}
		t.Stop()
	}
}

// startWait bounds how long a signal waits for bash to begin the command.
const startWait = 2 * time.Second

func (vc *visibleCmd) signal(sig syscall.Signal) error {
	// A signal that reaches bash while it still reads the typed line makes
	// it discard the line: the nonce is never set, the hook reports another
	// command's, and the session would never end. Wait until the line runs.
	for deadline := time.Now().Add(startWait); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(vc.started); err == nil || vc.s.isDone() {
			break
		}
	}
	pg := vc.sh.foreground()
	leader := procComm(pg)
	if vc.s.isDone() || !vc.sh.signalForeground(sig, true) {
		return errGone
	}
	if leader == procComm(vc.sh.pid) {
		// The signal met a bash: the shell itself, which may have been
		// forking the command's job (bash blocks signals across fork, the
		// child does not inherit a pending one, and a bash waiting for a
		// job ignores SIGINT), or that job before its exec (it catches the
		// signal with bash's handler and forgets it at exec). As a person
		// would press ^C again, signal once more the job that then owns
		// the terminal, if a new one took it or its leader has exec'd.
		for i := 0; i < 200 && !vc.s.isDone(); i++ {
			time.Sleep(5 * time.Millisecond)
			fg := vc.sh.foreground()
			if fg > 0 && fg != vc.sh.pid && (fg != pg || procComm(fg) != leader) {
				_ = syscall.Kill(-fg, sig)
				break
			}
		}
	}
	return nil
}

// input types p into the terminal for the running command. eof sends the
// terminal's end-of-file character, twice when a partial line is pending
// (the first only submits the line).
func (vc *visibleCmd) input(ctx context.Context, p []byte, eof bool) error {
	// Typed after the command ended, the data would run as a shell
	// command. This check narrows that window; it cannot close it, as the
	// command may end while the bytes are in flight.
	vc.m.vt.mu.Lock()
	current := vc.sh.current == vc
	vc.m.vt.mu.Unlock()
	if !current || vc.s.isDone() {
		return errGone
	}
	data := append([]byte(nil), p...)
	vc.mu.Lock()
	if len(p) > 0 {
		vc.partialLine = p[len(p)-1] != '\n'
	}
	if eof {
		veof := vc.sh.base.Cc[syscall.VEOF]
		if vc.partialLine {
			data = append(data, veof)
		}
		data = append(data, veof)
		vc.partialLine = false
	}
	vc.mu.Unlock()
	vc.m.echoInput(vc.sh, p)
	return vc.sh.write(ctx, data)
}

// procComm is the command name of pid ("" when it is gone).
func procComm(pid int) string {
	if pid <= 0 {
		return ""
	}
	return proctree.Ref{Pid: pid}.Comm()
}
