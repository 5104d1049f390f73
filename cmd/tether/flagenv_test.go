//go:build !windows

package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
)

// envCommands are every command that parses flags, each run as run() would
// and answering its exit status.
var envCommands = []struct {
	name string // as its FlagSet is named
	run  func(args []string, stderr io.Writer) int
}{
	{"broker", exitOf(runBroker)},
	{"bridge", exitOf(runBridge)},
	{"up", exitOf(func(args []string, stderr io.Writer) error { return runUp(args, io.Discard, stderr) })},
	{"mcp", exitOf(runMCP)},
	{"call", func(args []string, stderr io.Writer) int { return runCall(args, io.Discard, stderr) }},
	{"calls status", verb(runCalls, "status")},
	{"calls wait", verb(runCalls, "wait")},
	{"calls cancel", verb(runCalls, "cancel")},
	{"attach", exitOf(func(args []string, stderr io.Writer) error { return runAttach(args, io.Discard, stderr) })},
	{"token", exitOf(func(args []string, stderr io.Writer) error { return runToken(args, io.Discard, stderr) })},
	{"keys new", exitOf(func(args []string, stderr io.Writer) error {
		return runKeys(append([]string{"new"}, args...), io.Discard, stderr)
	})},
	{"keys remove", exitOf(func(args []string, stderr io.Writer) error {
		return runKeys(append([]string{"remove"}, args...), io.Discard, stderr)
	})},
	{"revoke", func(args []string, stderr io.Writer) int { return runRevoke(args, io.Discard, stderr) }},
}

// exitOf is run()'s exit status of a command that returns an error, with
// the error's text written to stderr as run() writes it.
func exitOf(cmd func([]string, io.Writer) error) func([]string, io.Writer) int {
	return func(args []string, stderr io.Writer) int {
		err := cmd(args, stderr)
		var ue usageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			io.WriteString(stderr, err.Error()+"\n")
			return 2
		default:
			io.WriteString(stderr, err.Error()+"\n")
			return 1
		}
	}
}

func verb(cmd func([]string, io.Writer, io.Writer) int, v string) func([]string, io.Writer) int {
	return func(args []string, stderr io.Writer) int {
		return cmd(append([]string{v}, args...), io.Discard, stderr)
	}
}

var errParsed = errors.New("flags parsed (test)")

// parsed runs command c with args and returns its flags as parsed, before
// it does anything with them; nil, its exit status and what it printed
// when it ended before (a refused value).
func parsed(t *testing.T, c int, args ...string) (*flag.FlagSet, int, string) {
	t.Helper()
	var got *flag.FlagSet
	parsedHook = func(fs *flag.FlagSet) error { got = fs; return errParsed }
	defer func() { parsedHook = nil }()
	var out bytes.Buffer
	code := envCommands[c].run(args, &out)
	return got, code, out.String()
}

// flagSample is two valid values of a flag that differ from its default
// and from each other; a repeatable flag's are comma-separated lists.
func flagSample(t *testing.T, cmd string, f *flag.Flag) (val, other string) {
	t.Helper()
	if g, ok := f.Value.(flag.Getter); ok {
		switch def := g.Get().(type) {
		case bool:
			if def {
				return "0", "true"
			}
			return "1", "false"
		case time.Duration:
			return "4242s", "17m"
		case int:
			return "4242", "17"
		case float64:
			return "42.5", "17.25"
		case string:
			return "tetherenv-a", "tetherenv-b"
		}
	}
	switch f.Name {
	case "cors-origin":
		return "https://a.example,https://b.example:8443", "*"
	case "trusted-proxies": // one value: its own comma-separated list
		return "10.0.0.0/8,192.168.1.1/32", "172.16.0.0/12"
	}
	if _, ok := f.Value.(listValue); ok {
		return "https://a.example/x,https://b.example/y", "https://c.example/z"
	}
	t.Fatalf("tether %s --%s: no sample value for its type %T; add one", cmd, f.Name, f.Value)
	return "", ""
}

// onLine is the command line that gives flag f the value v: each item of
// a repeatable flag's list as one use of it.
func onLine(f *flag.Flag, v string) []string {
	if _, ok := f.Value.(listValue); ok {
		var args []string
		for _, item := range splitList(v) {
			args = append(args, "--"+f.Name+"="+item)
		}
		return args
	}
	return []string{"--" + f.Name + "=" + v}
}

// clearFlagEnv unsets (as empty, which counts as unset) the variable of
// every flag of every command, so the machine's environment does not show.
func clearFlagEnv(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	for c := range envCommands {
		fs, _, out := parsed(t, c)
		if fs == nil {
			t.Fatalf("tether %s with no arguments ended before its flags were parsed: %s", envCommands[c].name, out)
		}
		fs.VisitAll(func(f *flag.Flag) {
			if name := flagEnv(fs.Name(), f.Name); name != "" {
				t.Setenv(name, "")
			}
		})
	}
}

// TestEveryFlagReadsItsVariable: for every flag of every command, its
// variable (flagEnv), set alone, gives the flag the value the command line
// would; the command line given too wins over it. A flag reading no
// variable is one envExceptions lists.
func TestEveryFlagReadsItsVariable(t *testing.T) {
	clearFlagEnv(t)
	checked, none := 0, 0
	for c, cmd := range envCommands {
		base, _, _ := parsed(t, c)
		if base.Name() != cmd.name {
			t.Fatalf("envCommands names %q the command whose FlagSet is %q", cmd.name, base.Name())
		}
		base.VisitAll(func(f *flag.Flag) {
			name := flagEnv(cmd.name, f.Name)
			if name == "" {
				if _, listed := envExceptions[cmd.name+" --"+f.Name]; !listed {
					t.Errorf("tether %s --%s reads no variable and envExceptions does not say so", cmd.name, f.Name)
				}
				none++
				return
			}
			val, other := flagSample(t, cmd.name, f)
			value := func(env string, args ...string) string {
				t.Helper()
				os.Setenv(name, env)
				defer os.Setenv(name, "")
				fs, code, out := parsed(t, c, args...)
				if fs == nil {
					t.Fatalf("tether %s %v with %s=%q: exit %d before its flags were parsed: %s", cmd.name, args, name, env, code, out)
				}
				return fs.Lookup(f.Name).Value.String()
			}
			def := f.Value.String()
			want := value("", onLine(f, val)...)
			if want == def {
				t.Fatalf("tether %s --%s=%s: the sample is the default %q", cmd.name, f.Name, val, def)
			}
			if got := value(val); got != want {
				t.Errorf("tether %s with %s=%s: --%s is %q, want %q (as %v gives)", cmd.name, name, val, f.Name, got, want, onLine(f, val))
			}
			wantOther := value("", onLine(f, other)...)
			if got := value(val, onLine(f, other)...); got != wantOther {
				t.Errorf("tether %s %v with %s=%s: --%s is %q, want the command line's %q", cmd.name, onLine(f, other), name, val, f.Name, got, wantOther)
			}
			checked++
		})
	}
	if got := envExceptions["attach --bridge-token"]; got != bridge.HTTPTokenEnv {
		t.Errorf("tether attach --bridge-token reads %s, bridge.ReadToken %s", got, bridge.HTTPTokenEnv)
	}
	for key := range envExceptions {
		cmd, flagName, _ := strings.Cut(key, " --")
		if strings.HasPrefix(key, "--") { // that flag of every command
			cmd, flagName = "", key[2:]
		}
		found := false
		for c, ec := range envCommands {
			if ec.name == cmd || cmd == "" {
				fs, _, _ := parsed(t, c)
				found = found || fs.Lookup(flagName) != nil
			}
		}
		if !found {
			t.Errorf("envExceptions names %q, which is no flag of a command", key)
		}
	}
	t.Logf("%d flags read their variable; %d read none (envExceptions)", checked, none)
	if checked < 120 {
		t.Errorf("checked %d flags; the commands have more", checked)
	}
}

// TestRefusedVariableNamesIt: a variable whose value its flag refuses (a
// switch, a number, a duration, an origin, a CIDR) ends the command with
// exit 2 and a message naming the variable.
func TestRefusedVariableNamesIt(t *testing.T) {
	clearFlagEnv(t)
	cases := 0
	for c, cmd := range envCommands {
		base, _, _ := parsed(t, c)
		base.VisitAll(func(f *flag.Flag) {
			name := flagEnv(cmd.name, f.Name)
			bad := ""
			if g, ok := f.Value.(flag.Getter); ok {
				switch g.Get().(type) {
				case bool, time.Duration, int, float64:
					bad = "tetherenv-bad"
				}
			}
			switch f.Name {
			case "cors-origin":
				bad = "https://a.example,ftp://b.example"
			case "trusted-proxies":
				bad = "10.0.0.0/8,not-a-cidr"
			}
			if name == "" || bad == "" {
				return
			}
			t.Setenv(name, bad)
			fs, code, out := parsed(t, c)
			t.Setenv(name, "")
			if fs != nil || code != 2 || !strings.Contains(out, name+": invalid value") {
				t.Errorf("tether %s with %s=%s: exit %d, parsed %v, printed %q; want exit 2 naming %s", cmd.name, name, bad, code, fs != nil, out, name)
			}
			cases++
		})
	}
	if cases < 30 {
		t.Errorf("tried %d refused values; the commands have more typed flags", cases)
	}
}
