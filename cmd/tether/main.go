// Command tether is the one binary of tether: the broker, the bridge daemon,
// an all-in-one development setup, and the tools around them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/gcpace"
	"github.com/tetherdev/tether/internal/procpace"
	"github.com/tetherdev/tether/internal/tuning"
)

const usage = `tether connects AI agents to where code lives.

Usage:
  tether broker  --listen ADDR [--secret-file F] [--keys FILE] [--jwks-url URL]...
                                                        run a broker (SIGHUP re-reads --keys; without
                                                        keys it makes and names a secret file)
  tether bridge  --broker URL --workspace ID --token T --root DIR [--http ADDR]
                                                        serve a directory's routes to a broker
  tether up      [--listen ADDR] [--root DIR]          broker + bridge in one process, for trying tether out
  tether call    --broker URL --token T --workspace ID [--timeout SEC] [--async] ENDPOINT [PAYLOAD_JSON]
                                                        send one call and print its response
                                                        (--async: submit it and print its id)
  tether calls   status|wait|cancel --broker URL --token T ID
                                                        read, wait for or cancel an async call
  tether mcp     --broker URL --token T --workspace ID  serve the workspace's tools to an agent over MCP (stdio)
  tether attach  --bridge-http ADDR [--write]          show the bridge's visible terminal live
  tether token   --secret-file F | --keys FILE [--kid K]  --role caller|bridge|admin --workspace ID|'*' [--ttl D] [--json]
                                                        mint a token
  tether keys    new --alg EdDSA|ES256|RS256|HS256 --kid K --private FILE --public-set FILE
                 remove --kid K --public-set FILE       keep a broker's --keys set
  tether revoke  --broker URL --token ADMIN_TOKEN (--jti J | --workspace W --issued-before T | --list)
                                                        revoke tokens, or list the revocations
  tether version [--json]                               the build's version, commit and commit time

Every flag also comes from the environment: --max-in-flight from TETHER_MAX_IN_FLIGHT
(the command line wins; a repeatable flag's variable is comma-separated).
Run 'tether COMMAND -h' for a command's flags and their variables.
`

func main() {
	// A bridge's terminal re-executes this binary as its reaper.
	reaperMain()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	server := cmd == "broker" || cmd == "bridge" || cmd == "up" || cmd == "mcp"
	if err := tuning.Check(); err != nil && server {
		fmt.Fprintf(stderr, "tether %s: %v\n", cmd, err)
		return 2
	}
	if _, set := os.LookupEnv("GOGC"); !set && server && tuning.On(tuning.GCPace) {
		// Relaying allocates many short-lived buffers; collecting 4x less
		// often cuts CPU per call by a sixth for a few MB of heap, but
		// over the heap of many idle connections 4x is tens of MB of
		// garbage: at most 16 MB of it, then (gcpace). GOGC in the
		// environment overrides it.
		(&gcpace.Pacer{Headroom: 16 << 20, MinPercent: 25, MaxPercent: 400}).Start()
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && server && tuning.On(tuning.ProcPace) {
		// At low load a second P costs CPU in thread wake-ups and does no
		// work: one P until the process needs more than 0.85 of a core
		// (procpace.Pacer's default Up), the runtime's default from then
		// on. GOMAXPROCS in the environment overrides it.
		// Quiet again after a busy spell (a burst of reconnects, say):
		// the garbage of the spell goes back to the OS at once, as V8's
		// memory reducer does for node, rather than being held as RSS.
		(&procpace.Pacer{OnQuiet: debug.FreeOSMemory}).Start()
	}
	switch cmd {
	case "broker":
		err = runBroker(rest, stderr)
	case "bridge":
		err = runBridge(rest, stderr)
	case "up":
		err = runUp(rest, stdout, stderr)
	case "call":
		return runCall(rest, stdout, stderr)
	case "calls":
		return runCalls(rest, stdout, stderr)
	case "mcp":
		err = runMCP(rest, stderr)
	case "attach":
		err = runAttach(rest, stdout, stderr)
	case "token":
		err = runToken(rest, stdout, stderr)
	case "keys":
		err = runKeys(rest, stdout, stderr)
	case "revoke":
		return runRevoke(rest, stdout, stderr)
	case "version", "--version", "-v":
		err = runVersion(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "tether: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "tether %s: %v\n", cmd, err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "tether %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// usageError marks a mistake in the command line (exit 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// logFlags adds --log-level and --log-format to fs and returns a function
// that builds the logger once flags are parsed.
func logFlags(fs *flag.FlagSet, w io.Writer) func() (zerolog.Logger, error) {
	level := fs.String("log-level", "info", "debug, info, warn or error")
	format := fs.String("log-format", "json", "json or console")
	return func() (zerolog.Logger, error) {
		lvl, err := zerolog.ParseLevel(*level)
		if err != nil {
			return zerolog.Nop(), usagef("--log-level: %v", err)
		}
		var out io.Writer = w
		switch *format {
		case "json":
		case "console":
			out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
		default:
			return zerolog.Nop(), usagef("--log-format must be json or console")
		}
		return zerolog.New(out).Level(lvl).With().Timestamp().Logger(), nil
	}
}

// setDefault gives fs's flag name another default than the one it was
// registered with (tether up's logs are for a person at a terminal), as its
// default: -h shows it, and docs/deploy.md's flags table, made from -h,
// says it.
// The value is set on the flag itself, not through fs.Set, so the flag
// does not count as given: its variable still applies (parseFlags).
func setDefault(fs *flag.FlagSet, name, value string) {
	if f := fs.Lookup(name); f != nil && f.Value.Set(value) == nil {
		f.DefValue = value
	}
}

// signalContext is cancelled on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// parse parses fs, its flags' variables included (parseFlags), and
// refuses positional arguments beyond max.
func parse(fs *flag.FlagSet, args []string, max int) error {
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > max {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args()[max:], " "))
	}
	return nil
}
