package check

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// brokerShutdownBound is how long a broker's shutdown may take at most,
// drain included: the context serveBroker (cmd/tether/broker.go) gives
// Shutdown. A service manager must wait longer before it kills.
const brokerShutdownBound = 30

// pendingNames are TETHER_* variables the deploy files set for flags that
// other work adds; each names that work. When the flag is in the doc's
// table (the code has it), the entry is an error: remove it.
var pendingNames = map[string]string{}

// pendingFlags are flags of tether broker the deploy files and the doc use
// that other work adds, as pendingNames.
var pendingFlags = map[string]string{}

// notFlags are TETHER_* variables read without a flag (docs/deploy.md,
// "Reference: flags"), and TETHER_UPDATE_DOCS, the knob of the test that
// writes the flags table.
var notFlags = map[string]bool{"TETHER_TUNING": true, "TETHER_BRIDGE_HTTP_TOKEN": true, "TETHER_UPDATE_DOCS": true}

type flagTable struct {
	flags map[string]map[string]bool // command -> flag names (without --)
	envs  map[string]bool            // every variable in the tables
}

var (
	tableOnce sync.Once
	table     flagTable
	tableErr  error
)

// docFlags reads the generated flags tables of docs/deploy.md (made from
// the code and checked against it by cmd/tether's TestDeployDocFlags).
func docFlags(t *testing.T) flagTable {
	t.Helper()
	tableOnce.Do(func() {
		var b []byte
		b, tableErr = os.ReadFile("../../docs/deploy.md")
		table = flagTable{flags: map[string]map[string]bool{}, envs: map[string]bool{}}
		cmd := ""
		row := regexp.MustCompile("^\\| `--([a-z0-9-]+)[^`]*` \\| (?:`(TETHER_[A-Z0-9_]+)`[^|]*|—) \\|")
		for _, line := range strings.Split(string(b), "\n") {
			if c, ok := strings.CutPrefix(line, "#### tether "); ok {
				cmd = c
				table.flags[cmd] = map[string]bool{}
				continue
			}
			if m := row.FindStringSubmatch(line); m != nil && cmd != "" {
				table.flags[cmd][m[1]] = true
				if m[2] != "" {
					table.envs[m[2]] = true
				}
			}
		}
	})
	if tableErr != nil {
		t.Fatal(tableErr)
	}
	if !table.flags["broker"]["listen"] || !table.envs["TETHER_LISTEN"] {
		t.Fatal("docs/deploy.md: no flags table with tether broker's --listen and TETHER_LISTEN (the pattern or the doc is wrong)")
	}
	return table
}

// checkEnv fails for a TETHER_* name no flag reads and no list names.
func checkEnv(t *testing.T, where, name string) {
	t.Helper()
	if !strings.HasPrefix(name, "TETHER_") {
		return
	}
	tab := docFlags(t)
	if why, ok := pendingNames[name]; ok {
		if tab.envs[name] {
			t.Errorf("%s is in the flags table now: remove it from pendingNames (it waited for %s)", name, why)
		}
		return
	}
	if !tab.envs[name] && !notFlags[name] {
		t.Errorf("%s sets %s, which no flag of tether reads (docs/deploy.md, Reference: flags)", where, name)
	}
}

// checkArgs fails for a --flag in args that tether cmd does not have.
func checkArgs(t *testing.T, where, cmd string, args []string) {
	t.Helper()
	tab := docFlags(t)
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if why, ok := pendingFlags[name]; ok && cmd == "broker" {
			if tab.flags[cmd][name] {
				t.Errorf("tether broker --%s is in the flags table now: remove it from pendingFlags (it waited for %s)", name, why)
			}
			continue
		}
		if !tab.flags[cmd][name] {
			t.Errorf("%s gives tether %s --%s, which it does not have", where, cmd, name)
		}
	}
}

// TestEnvFilesNameWhatTheCodeReads checks the systemd units' example
// environment files: every TETHER_* variable is one a flag reads, and no
// line passes flags around the variables (a BROKER_FLAGS line, say): every
// flag has its variable.
func TestEnvFilesNameWhatTheCodeReads(t *testing.T) {
	for file, cmd := range map[string]string{"../systemd/broker.env.example": "broker", "../systemd/bridge.env.example": "bridge"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Errorf("%s: %q is not NAME=value", file, line)
				continue
			}
			n++
			checkEnv(t, file, k)
			if strings.HasPrefix(strings.TrimSpace(v), "--") || strings.HasSuffix(k, "_FLAGS") {
				t.Errorf("%s: %s passes flags to tether %s; set each flag's TETHER_* variable instead", file, k, cmd)
			}
		}
		if n == 0 {
			t.Errorf("%s sets nothing", file)
		}
	}
}

// TestDocShowsTheBrokerEnvFile fails when the environment file in section 6
// of docs/deploy.md and deploy/systemd/broker.env.example differ (the doc
// shows the file without its comments), so that one cannot change alone.
func TestDocShowsTheBrokerEnvFile(t *testing.T) {
	ex, err := os.ReadFile("../systemd/broker.env.example")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(ex), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			want = append(want, line)
		}
	}
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "\n### The three brokers\n")
	_, rest, ok2 := strings.Cut(rest, "```sh\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/deploy.md: no sh block under \"### The three brokers\"")
	}
	if got := strings.Split(strings.TrimSpace(block), "\n"); !slices.Equal(got, want) {
		t.Errorf("docs/deploy.md's broker env file:\n%s\n\ndeploy/systemd/broker.env.example without comments:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDeployDocNamesWhatTheCodeReads checks docs/deploy.md's own examples:
// every TETHER_* variable it names is one tether reads, and every flag of a
// `tether broker` or `tether bridge` command line in its shell blocks is
// one that command has.
func TestDeployDocNamesWhatTheCodeReads(t *testing.T) {
	b, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, name := range regexp.MustCompile(`\bTETHER_[A-Z0-9_]*[A-Z0-9]\b`).FindAllString(doc, -1) {
		checkEnv(t, "docs/deploy.md", name)
	}
	// Shell blocks: join continued lines, then take each tether command.
	cmdRE := regexp.MustCompile(`\btether (broker|bridge)\b(.*)`)
	commands := 0
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		joined := strings.ReplaceAll(block[1], "\\\n", " ")
		// A command inside $(…) is another command's (tether token's).
		joined = regexp.MustCompile(`\$\([^)]*\)`).ReplaceAllString(joined, "")
		for _, line := range strings.Split(joined, "\n") {
			m := cmdRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			commands++
			checkArgs(t, "docs/deploy.md: "+strings.TrimSpace(line), m[1], strings.Fields(m[2]))
		}
	}
	if commands < 5 {
		t.Errorf("found %d tether broker/bridge command lines in docs/deploy.md; the pattern is wrong", commands)
	}
}
