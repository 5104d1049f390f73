//go:build !windows

package dap

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Warm Python starts. A warm debugpy adapter alone saves only its own start
// (about 110 ms): a launch still starts debugpy's launcher, and the launcher
// the debuggee, whose interpreter then imports pydevd (300-450 ms). So a
// warm debugpy is started by debugpy_warm.py, which runs debugpy's own
// adapter and, on initialize, starts its launcher and that launcher's
// debuggee ahead, as a cold launch would start them (same interpreter,
// working directory, environment, stdio, pipes and process group); the
// debuggee imports debugpy's server and pydevd and waits. A launch whose
// launcher and debuggee would be started exactly so (no env, no python or
// pythonArgs of its own, the launch's cwd the adapter's, console
// internalConsole, no debugpy logging) hands them the rest of their command
// lines, and from there debugpy's own launcher and cli run as in a cold
// launch: the program, its argv, sys.path, __main__, output, exit code and
// stack are a cold launch's (the loader's frame is compiled under the name
// of debugpy's __main__.py, so pydevd hides it and a traceback reads the
// same). Any other launch starts its own launcher and debuggee, and the
// ones waiting are ended; so does a launch that finds them dead (killed
// while they waited), their site directories changed since they started
// (a .pth from pip install -e, a user site directory made since: read at
// an interpreter's start), or the working directory made again. The
// interpreter's own command line (sys.orig_argv, /proc/self/cmdline) is
// the one difference left.
//
// Like every debugpy adapter of tether, a warm one acknowledges pydevd's
// messages at once (debugpyAdapterMain runs the script).
//
// The launcher and debuggee are the adapter's children: they end with it
// (closing the adapter's end of their pipe ends them), and its process tree
// is killed as any adapter's.

//go:embed debugpy_warm.py
var debugpyWarmScript []byte

// warmCommander is an adapter whose warm process is started by another
// command than a cold one, doing the same and more ahead.
type warmCommander interface {
	warmCommand(spec Command, scripts *warmScripts) (Command, error)
}

var _ warmCommander = debugpyAdapter{}

// warmCommand runs debugpy_warm.py in place of debugpy's adapter, through
// the same bootstrap, interpreter and environment.
func (debugpyAdapter) warmCommand(spec Command, scripts *warmScripts) (Command, error) {
	if !slices.Equal(spec.Args, []string{"-c", debugpyAdapterMain}) {
		return spec, nil
	}
	script, err := scripts.path("debugpy_warm.py", debugpyWarmScript)
	if err != nil {
		return Command{}, err
	}
	warm := spec
	warm.Args = []string{"-c", debugpyAdapterMain, script, "adapter"}
	return warm, nil
}

// warmScripts is a pool's directory of helper scripts, written on first
// use and removed with the pool. A warm launcher also makes its debuggee's
// start-up directory there (the debuggee removes it once started).
type warmScripts struct {
	mu  sync.Mutex
	dir string
}

// path writes body as name in the directory (once) and returns its path.
func (w *warmScripts) path(name string, body []byte) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dir == "" {
		dir, err := os.MkdirTemp("", "tether-warm-")
		if err != nil {
			return "", fmt.Errorf("making the warm scripts' directory: %w", err)
		}
		w.dir = dir
	}
	p := filepath.Join(w.dir, name)
	if b, err := os.ReadFile(p); err == nil && string(b) == string(body) {
		return p, nil
	}
	if err := os.WriteFile(p, body, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", name, err)
	}
	return p, nil
}

// remove removes the directory; the pool calls it once no warm adapter
// can use it.
func (w *warmScripts) remove() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dir != "" {
		_ = os.RemoveAll(w.dir)
		w.dir = ""
	}
}
