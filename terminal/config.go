//go:build !windows

package terminal

import (
	"time"

	"github.com/rs/zerolog"
)

// Defaults for the zero fields of Config.
const (
	DefaultOutputCap   = 80_000
	DefaultRingSize    = 1 << 20
	DefaultKillGrace   = 2 * time.Second
	DefaultTimeout     = 120 * time.Second
	DefaultMaxSessions = 64
)

// Config configures a Manager. Zero fields take the defaults above.
type Config struct {
	// Root is the directory commands run in unless they ask for another;
	// a requested cwd must be Root or below it. Required.
	Root string
	// OutputCap bounds a sync result's output in bytes; longer output
	// keeps its head and tail and sets truncated. It also bounds one
	// Output call's chunk.
	OutputCap int
	// RingSize is how many of its most recent bytes an async session
	// keeps for Output.
	RingSize int
	// KillGrace is how long a process group gets between SIGTERM and
	// SIGKILL, and each escalation step of an interrupted visible command.
	KillGrace time.Duration
	// DefaultTimeout applies to sync commands that give none. Async
	// commands without a timeout run until they exit, are signalled or
	// the Manager closes.
	DefaultTimeout time.Duration
	// MaxSessions bounds the async sessions running at once.
	MaxSessions int
	// Shell is the bash used for the visible terminal and to run hidden
	// commands (as shell -c command). Default: bash from PATH, else
	// /bin/sh for hidden commands and no visible terminal.
	Shell string
	// Reaper is the command line of the process that ends the Manager's
	// commands if this process dies without Close (see ReaperMain). nil
	// means this executable with ReaperCommand when the program called
	// ReaperMain, else no reaper; an empty non-nil slice means none.
	// The program named must call ReaperMain first thing in main.
	Reaper []string
	// Logger receives lifecycle events. Execute prefers the logger in
	// its ctx (zerolog.Ctx), which carries the call's correlation_id.
	Logger zerolog.Logger
}
