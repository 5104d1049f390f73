//go:build !windows

package proctree

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchdogScript is the watchdog: it keeps the list of guarded process
// groups from "+ PGID" and "- PGID" lines on its stdin, and when stdin
// reports end of file (the only holder of the write end, the process that
// started it, is gone) SIGKILLs each group left. The list is a string of
// " PGID " words (digits only, so no pattern character), edited with the
// shell's own expansions: no fork per line. "reset" empties it.
// Hangup and interrupt are ignored: they are meant for the owner.
const watchdogScript = `trap '' HUP INT PIPE
g=' '
while read -r op pg; do
  case $op in
    +) g="$g$pg " ;;
    -) case $g in *" $pg "*) g="${g%% $pg *} ${g#* $pg }" ;; esac ;;
    reset) g=' ' ;;
  esac
done
for pg in $g; do kill -s KILL -- "-$pg" 2>/dev/null; done
`

// Watchdog kills the process groups it guards when the process that
// started it dies without forgetting them. Watch and Forget are one write
// of a few bytes each (less than PIPE_BUF, which the kernel keeps whole),
// safe for concurrent use.
type Watchdog struct {
	cmd *exec.Cmd
	w   *os.File
}

// NewWatchdog starts a watchdog. Close ends it, killing nothing.
func NewWatchdog() (*Watchdog, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("making the watchdog's pipe: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", watchdogScript)
	cmd.Stdin = r
	cmd.Dir = "/"
	// Nothing inherited: the watchdog is not a command of ours that a
	// test's leak check (which marks children through the environment)
	// should count.
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	// Its own group: a ^C to this process's group must not end it first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	return &Watchdog{cmd: cmd, w: w}, nil
}

// Watch guards process group pgid: it is SIGKILLed if this process dies
// before Forget(pgid).
func (d *Watchdog) Watch(pgid int) { d.send('+', pgid) }

// Forget stops guarding process group pgid.
func (d *Watchdog) Forget(pgid int) { d.send('-', pgid) }

func (d *Watchdog) send(op byte, pgid int) {
	if d == nil || pgid <= 1 {
		return
	}
	b := append([]byte{op, ' '}, strconv.Itoa(pgid)...)
	d.write(append(b, '\n'))
}

// write writes line at once or not at all: Start and Forget run on
// request paths, which a watchdog that stopped reading must not hold up
// (a plain Write would wait for room in the pipe). A line is under
// PIPE_BUF, so the kernel takes it whole or answers EAGAIN; a full pipe
// loses the line, as the terminal's reaper does.
func (d *Watchdog) write(line []byte) {
	rc, err := d.w.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Write(func(fd uintptr) bool {
		_, _ = unix.Write(int(fd), line)
		return true
	})
}

// Close ends the watchdog without killing anything: it forgets every
// group, closes the pipe and waits for the watchdog to exit.
func (d *Watchdog) Close() error {
	if d == nil {
		return nil
	}
	// A line the script cannot match empties its list before end of file.
	d.write([]byte("reset\n"))
	_ = d.w.Close()
	return d.cmd.Wait()
}

// The process's own watchdog, started on the first Start that needs it and
// kept until the process exits: its exit is what the watchdog waits for.
var watchdog struct {
	once sync.Once
	d    *Watchdog
	err  error
}

// defaultWatchdog returns the process's watchdog, or nil (with a warning
// on stderr, once) when it cannot start: children then run unguarded.
func defaultWatchdog() *Watchdog {
	watchdog.once.Do(func() {
		watchdog.d, watchdog.err = NewWatchdog()
		if watchdog.err != nil {
			fmt.Fprintf(os.Stderr, "proctree: %v; child processes may outlive this one\n", watchdog.err)
		}
	})
	return watchdog.d
}
