//go:build !windows

package dap

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/dap/node"
	"github.com/tetherdev/tether/internal/proctree"
)

// Env is where adapters and native debuggers are looked up, with every
// lookup and probe cached: the machine does not change its debuggers while a
// bridge runs, and probing an adapter costs a process start. Safe for
// concurrent use.
type Env struct {
	// Path is the search path (the PATH syntax).
	Path string
	// Environ is the environment adapters are started with; its PATH is
	// replaced by Path.
	Environ []string

	mu     sync.Mutex
	cache  map[string]*once // keyed by what was looked up
	probes map[string]*once // keyed by adapter name
	// filters are each probed adapter's exception filters, by name.
	filters map[string][]ExceptionFilter
	// nodeWarm holds the built-in Node adapter's warm nodes; nil when
	// warm adapters are off (warm_node.go).
	nodeWarm *node.Pool
}

type once struct {
	o   sync.Once
	val string
	err error
}

// NewEnv returns an Env searching path with the environment environ.
func NewEnv(path string, environ []string) *Env {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	out = append(out, "PATH="+path)
	return &Env{Path: path, Environ: out, cache: map[string]*once{}, probes: map[string]*once{}}
}

func (e *Env) memo(m map[string]*once, key string, f func() (string, error)) (string, error) {
	e.mu.Lock()
	o := m[key]
	if o == nil {
		o = &once{}
		m[key] = o
	}
	e.mu.Unlock()
	o.o.Do(func() { o.val, o.err = f() })
	return o.val, o.err
}

func (e *Env) dirs() []string {
	var out []string
	for _, d := range filepath.SplitList(e.Path) {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// lookVersioned finds name on the path, or else name-NN with the highest NN
// (Debian installs lldb-dap-19 without an unversioned link).
func (e *Env) lookVersioned(name string) string {
	p, _ := e.memo(e.cache, "versioned:"+name, func() (string, error) {
		for _, d := range e.dirs() {
			if p := filepath.Join(d, name); executable(p) {
				return p, nil
			}
		}
		re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `-(\d+)$`)
		best, bestV := "", -1
		for _, d := range e.dirs() {
			matches, _ := filepath.Glob(filepath.Join(d, name+"-*"))
			for _, m := range matches {
				sub := re.FindStringSubmatch(filepath.Base(m))
				if sub == nil || !executable(m) {
					continue
				}
				if v, _ := strconv.Atoi(sub[1]); v > bestV {
					best, bestV = m, v
				}
			}
		}
		return best, nil
	})
	return p
}

// look finds name on the path only.
func (e *Env) look(name string) string {
	for _, d := range e.dirs() {
		if p := filepath.Join(d, name); executable(p) {
			return p
		}
	}
	return ""
}

// pythonWithDebugpy is the first interpreter that can import debugpy: python3
// and python on the path, then the system /usr/bin/python3 (a pyenv or venv
// python first on PATH often lacks debugpy while the distribution's has it).
func (e *Env) pythonWithDebugpy() string {
	p, _ := e.memo(e.cache, "python-debugpy", func() (string, error) {
		var cands []string
		for _, n := range []string{"python3", "python"} {
			if p := e.look(n); p != "" {
				cands = append(cands, p)
			}
		}
		cands = append(cands, "/usr/bin/python3")
		for _, p := range cands {
			if executable(p) && e.run(p, "-c", "import debugpy") == nil {
				return p, nil
			}
		}
		return "", nil
	})
	return p
}

var dlvVersion = regexp.MustCompile(`Version:\s*v?(\d+)\.(\d+)\.(\d+)`)

// bestDelve is the newest dlv on the path: an old delve (Debian's 1.20) cannot
// debug programs built by a newer Go, and the project's pinned one may sit
// anywhere on PATH.
func (e *Env) bestDelve() string {
	p, _ := e.memo(e.cache, "dlv", func() (string, error) {
		best, bestV := "", -1
		seen := map[string]bool{}
		for _, d := range e.dirs() {
			p := filepath.Join(d, "dlv")
			real, err := filepath.EvalSymlinks(p)
			if err != nil || seen[real] || !executable(p) {
				continue
			}
			seen[real] = true
			out, err := e.output(p, "version")
			if err != nil {
				continue
			}
			m := dlvVersion.FindStringSubmatch(out)
			if m == nil {
				continue
			}
			a, _ := strconv.Atoi(m[1])
			b, _ := strconv.Atoi(m[2])
			c, _ := strconv.Atoi(m[3])
			if v := a*1_000_000 + b*1_000 + c; v > bestV {
				best, bestV = p, v
			}
		}
		return best, nil
	})
	return p
}

func (e *Env) run(path string, args ...string) error {
	_, err := e.output(path, args...)
	return err
}

func (e *Env) output(path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(e.Environ[:len(e.Environ):len(e.Environ)], noTelemetryChild) // dlv version would start it too
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{}, syscall.SIGKILL)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// NativeDebuggers gives the paths of the debuggers found, by name: lldb,
// lldb_dap, gdb, dlv, python (the one with debugpy, else python3), node
// (and node_version). Missing ones are absent.
func (e *Env) NativeDebuggers() map[string]string {
	out := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			out[k] = v
		}
	}
	set("lldb", e.lookVersioned("lldb"))
	set("lldb_dap", e.findLLDBDAP())
	set("gdb", e.lookVersioned("gdb"))
	set("dlv", e.bestDelve())
	py := e.pythonWithDebugpy()
	if py == "" {
		py = e.look("python3")
	}
	set("python", py)
	if n := e.lookVersioned("node"); n != "" {
		set("node", n)
		set("node_version", e.nodeVersion(n))
	}
	return out
}

// nodeVersion is `node --version` (v20.20.2), once per Env.
func (e *Env) nodeVersion(node string) string {
	v, _ := e.memo(e.cache, "node-version:"+node, func() (string, error) {
		out, err := e.output(node, "--version")
		return strings.TrimSpace(out), err
	})
	return v
}

// Probe reports whether a can really be launched: found on the path and
// answering initialize. The answer is cached for the Env's life.
func (e *Env) Probe(ctx context.Context, a Adapter) (string, error) {
	return e.memo(e.probes, a.Name(), func() (string, error) {
		spec, err := a.Find(e)
		if err != nil {
			return "", err
		}
		// The probe outlives no caller but is shared by all: bound it on its own.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		p, err := startAdapter(pctx, spec, "", e.Environ, handlers{adapter: a.Name()})
		if err != nil {
			return "", err
		}
		defer p.kill()
		var caps json.RawMessage
		if err := p.client.Do(pctx, "initialize", initializeArgs(a, false), &caps); err != nil {
			return "", err
		}
		e.mu.Lock()
		if e.filters == nil {
			e.filters = map[string][]ExceptionFilter{}
		}
		e.filters[a.Name()] = filtersOf(caps)
		e.mu.Unlock()
		return spec.Path, nil
	})
}

// Available probes every registered adapter concurrently and returns those
// that answered, in registry order.
func (e *Env) Available(ctx context.Context) []AdapterInfo {
	res := make([]AdapterInfo, len(Adapters))
	ok := make([]bool, len(Adapters))
	var wg sync.WaitGroup
	for i, a := range Adapters {
		wg.Go(func() {
			p, err := e.Probe(ctx, a)
			if err == nil {
				e.mu.Lock()
				filters := e.filters[a.Name()]
				e.mu.Unlock()
				if filters == nil {
					filters = []ExceptionFilter{}
				}
				res[i] = AdapterInfo{Name: a.Name(), Types: a.Types(), Path: p, ExceptionFilters: filters}
				if d, isDescriber := a.(describer); isDescriber {
					res[i].Implementation, res[i].Version = d.describe(e)
				}
				ok[i] = true
			}
		})
	}
	wg.Wait()
	var out []AdapterInfo
	for i := range res {
		if ok[i] {
			out = append(out, res[i])
		}
	}
	return out
}

// initializeArgs are tether's initialize arguments; children advertises
// startDebugging, for an adapter that runs child sessions.
func initializeArgs(a Adapter, children bool) map[string]any {
	return map[string]any{
		"clientID":                      "tether",
		"clientName":                    "tether",
		"adapterID":                     a.Name(),
		"locale":                        "en-US",
		"linesStartAt1":                 true,
		"columnsStartAt1":               true,
		"pathFormat":                    "path",
		"supportsVariableType":          true,
		"supportsVariablePaging":        false,
		"supportsRunInTerminalRequest":  false,
		"supportsStartDebuggingRequest": children,
		"supportsProgressReporting":     false,
		"supportsInvalidatedEvent":      false,
		"supportsMemoryReferences":      false,
	}
}
