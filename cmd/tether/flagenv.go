package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// Every flag of every command reads an environment variable, so that a
// container, a systemd EnvironmentFile= or a Kubernetes ConfigMap can set
// any of them without rewriting the command line. The rule, written here
// once: --max-in-flight reads TETHER_MAX_IN_FLIGHT (TETHER_, then the name
// upper-cased with - as _); envExceptions lists the flags that differ.
// parseFlags applies it, -h shows it (describeEnv), and docs/deploy.md's
// flags table is made from that -h.
//
// Precedence: the command line, then the variable, then the default. An
// empty variable counts as unset. A repeatable flag's variable holds its
// values separated by commas; a switch's takes true, false, 1 or 0. A value
// the flag refuses is a usage error (exit 2) naming the variable.

// envPrefix starts every flag's variable.
const envPrefix = "TETHER_"

// envExceptions are the flags whose variable is not the rule's, keyed by
// "command --flag" (the command as its FlagSet is named), or "--flag" for
// that flag of every command: another name, or "" for none.
var envExceptions = map[string]string{
	// The W3C convention for a command run inside a traced job
	// (tether call, tether calls …).
	"--traceparent": "TRACEPARENT",
	// The bridge's HTTP listener: its name from before the rule, which
	// tether attach's --bridge-http shares; tether up's --http is the same
	// listener.
	"bridge --http": "TETHER_BRIDGE_HTTP",
	"up --http":     "TETHER_BRIDGE_HTTP",
	// bridge.HTTPTokenEnv, the variable bridge.ReadToken reads, the one
	// every client of the bridge's listener knows (spelt out: package
	// bridge is not built on Windows, and this file is; a test checks).
	"attach --bridge-token": "TETHER_BRIDGE_HTTP_TOKEN",
	// tether token's --keys is a private key set; TETHER_KEYS, set in a
	// shell or file holding a broker's settings, is the broker's public one.
	"token --keys": "",
	// tether revoke acts on what it is given: a jti or workspace left in the
	// environment would revoke tokens nobody named on the command line.
	"revoke --jti":           "",
	"revoke --workspace":     "",
	"revoke --issued-before": "",
	"revoke --list":          "",
}

// flagEnv returns the variable flag name of command cmd reads, or "".
func flagEnv(cmd, name string) string {
	if v, ok := envExceptions[cmd+" --"+name]; ok {
		return v
	}
	if v, ok := envExceptions["--"+name]; ok {
		return v
	}
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// listValue is a repeatable flag (each use adds a value): its variable
// holds the values separated by commas, each given to Set in turn.
type listValue interface {
	flag.Value
	repeatable()
}

// envError is a variable whose value its flag refuses.
type envError struct {
	name, flag, value string
	err               error
}

func (e *envError) Error() string {
	return fmt.Sprintf("%s: invalid value %q for --%s: %v", e.name, e.value, e.flag, e.err)
}

func (e *envError) Unwrap() error { return e.err }

// parsedHook, when a test sets it, is called with each command's flags once
// they are parsed, and its error ends the command there: the flags of a
// command are seen without running it.
var parsedHook func(fs *flag.FlagSet) error

// parseFlags parses args into fs, then sets each flag the command line did
// not set from its variable. Errors of the command line are the flag
// package's (printed by it); a refused variable is an *envError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	describeEnv(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	onLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onLine[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := flagEnv(fs.Name(), f.Name)
		if err != nil || onLine[f.Name] || name == "" {
			return
		}
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return
		}
		values := []string{v}
		if _, ok := f.Value.(listValue); ok {
			values = splitList(v)
		}
		for _, item := range values {
			if e := fs.Set(f.Name, item); e != nil {
				err = &envError{name: name, flag: f.Name, value: v, err: wantKind(f.Value, e)}
				return
			}
		}
	})
	if err == nil && parsedHook != nil {
		err = parsedHook(fs)
	}
	return err
}

// wantKind says what a typed flag wanted: the flag package's own errors
// for them are only "parse error" and "value out of range".
func wantKind(v flag.Value, err error) error {
	g, ok := v.(flag.Getter)
	if !ok {
		return err
	}
	switch g.Get().(type) {
	case bool:
		return fmt.Errorf("%w: want true, false, 1 or 0", err)
	case time.Duration:
		return fmt.Errorf("%w: want a duration such as 10s or 1m30s", err)
	case int, int64, uint, uint64:
		return fmt.Errorf("%w: want a whole number", err)
	case float64:
		return fmt.Errorf("%w: want a number", err)
	}
	return err
}

// describeEnv adds each flag's variable to its usage: -h shows it, on a
// line of its own before the default.
func describeEnv(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name := flagEnv(fs.Name(), f.Name)
		if name == "" || strings.Contains(f.Usage, "\nenvironment: ") {
			return
		}
		f.Usage += "\nenvironment: " + name
		if _, ok := f.Value.(listValue); ok {
			f.Usage += " (comma-separated)"
		}
	})
}

// parseStatus is the exit status of a command that returns one (call,
// calls, revoke) after parseFlags failed: 0 for -h, else 2; a refused
// variable is printed here, as the flag package printed the rest.
func parseStatus(fs *flag.FlagSet, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *envError
	if errors.As(err, &ee) {
		fmt.Fprintf(fs.Output(), "tether %s: %v\n", fs.Name(), err)
	}
	return 2
}

// splitList reads a comma-separated flag value; empty items are dropped.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
