//go:build !windows

package dap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/tetherdev/tether/internal/proctree"
)

// prebuilder is an adapter whose launch spends most of its time building
// the program (delve: go build, then link, into a fresh file every time).
// With warm adapters on, the session builds it first into a binary the
// pool keeps per program (warmBuilds), so that go build finds it up to date
// and skips the link when nothing changed, and launchPrebuilt rewrites cfg
// to run that binary. go build itself judges what changed, as it does for
// delve. buildable says whether cfg is one the prebuild reproduces exactly;
// any other launch is built by the adapter as when cold.
type prebuilder interface {
	buildable(cfg map[string]any) bool
	buildArgs(cfg map[string]any, out string) []string
	launchPrebuilt(cfg map[string]any, out string)
}

// warmBuilds is the directory of prebuilt binaries of one manager, made on
// first use and removed with the pool.
type warmBuilds struct {
	mu  sync.Mutex // one build at a time: two of one program write one file
	dir string
}

// prebuild builds cfg's program with go in dir (the adapter's working
// directory, where the adapter would build it) and returns a copy of cfg
// rewritten to run the result. It returns cfg itself, untouched, when the
// launch is not one it reproduces or the build failed: the adapter then
// builds as when cold and reports any build error itself.
func (b *warmBuilds) prebuild(ctx context.Context, env *Env, pb prebuilder, cfg map[string]any, dir string) map[string]any {
	if b == nil || !pb.buildable(cfg) {
		return cfg
	}
	gobin := env.look("go")
	if gobin == "" {
		return cfg
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir == "" {
		d, err := os.MkdirTemp("", "tether-prebuilt-")
		if err != nil {
			return cfg
		}
		b.dir = d
	}
	prog, _ := cfg["program"].(string)
	sum := sha256.Sum256([]byte(dir + "\x00" + prog))
	out := filepath.Join(b.dir, "debug-"+hex.EncodeToString(sum[:8]))
	cmd := exec.Command(gobin, pb.buildArgs(cfg, out)...)
	cmd.Dir = dir
	cmd.Env = env.Environ
	if err := proctree.Start(cmd); err != nil {
		return cfg
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	stop()
	proctree.KillGroup(cmd.Process.Pid, nil) // the compiler and linker it started, if killed meanwhile
	proctree.Forget(cmd.Process.Pid)
	if err != nil {
		return cfg
	}
	cfg = cloneConfig(cfg)
	pb.launchPrebuilt(cfg, out)
	return cfg
}

// remove deletes the prebuilt binaries.
func (b *warmBuilds) remove() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
		b.dir = ""
	}
}

// delve's prebuild: what dlv dap does for mode "debug" (go build with
// optimisations and inlining off, -gcflags=all=-N -l, of the program
// path as given), then mode "exec" of the binary. Anything that may change
// the build (buildFlags, output, an env or envFile, which dlv sets on
// itself before it builds) or a mode other than debug is left to delve.
var _ prebuilder = delveAdapter{}

func (delveAdapter) buildable(cfg map[string]any) bool {
	if cfg["request"] != "launch" || cfg["mode"] != "debug" {
		return false
	}
	if p, _ := cfg["program"].(string); !filepath.IsAbs(p) {
		return false
	}
	for _, k := range []string{"buildFlags", "output", "dlvFlags", "envFile"} {
		if _, ok := cfg[k]; ok {
			return false
		}
	}
	if env, ok := cfg["env"].(map[string]any); ok && len(env) > 0 {
		return false // dlv sets a launch's env on itself, so go build sees it too
	}
	return true
}

func (delveAdapter) buildArgs(cfg map[string]any, out string) []string {
	prog, _ := cfg["program"].(string)
	return []string{"build", "-o", out, "-gcflags=all=-N -l", prog}
}

func (delveAdapter) launchPrebuilt(cfg map[string]any, out string) {
	cfg["mode"] = "exec"
	cfg["program"] = out
}
