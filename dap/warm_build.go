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
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// prebuilder is an adapter whose launch spends most of its time building
// the program (delve: go build, then link, into a fresh file every time).
// With warm adapters on, the session builds it first into a binary the
// pool keeps per program (warmBuilds), so that go build finds it up to date
// and skips the link when nothing changed, and launchPrebuilt rewrites cfg
// to run that binary. go build itself judges what changed, as it does for
// delve, unless a build stamp (warm_stamp.go) shows that nothing it can
// read has changed since it last built that binary: then go does not run. buildable says whether cfg is one the prebuild reproduces exactly;
// any other launch is built by the adapter as when cold.
type prebuilder interface {
	buildable(cfg map[string]any) bool
	buildArgs(cfg map[string]any, out string) []string
	launchPrebuilt(cfg map[string]any, out string)
}

// warmBuilds is the directory of prebuilt binaries of one manager, made on
// first use and removed with the pool, and the stamp of each binary's last
// build (warm_stamp.go).
type warmBuilds struct {
	mu     sync.Mutex // one build at a time: two of one program write one file
	dir    string
	stamps map[string]builtStamp // by binary: what its last successful build read
	goRuns int                   // go builds started (tests count them)
}

// builtStamp is what a binary was built from (buildStamp's sum) and the
// binary's own stat once built: if it is gone or changed, it is built again.
type builtStamp struct {
	sum [32]byte
	bin string
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
	args := pb.buildArgs(cfg, out)
	sum, fresh, stampErr := [32]byte{}, false, errNoStamp
	if buildStampsOn {
		sum, fresh, stampErr = buildStamp(gobin, args, dir, env.Environ, time.Now())
	}
	if rec, ok := b.stamps[out]; ok && stampErr == nil && rec.sum == sum && rec.bin != "" && rec.bin == fileStamp(out) {
		cfg = cloneConfig(cfg)
		pb.launchPrebuilt(cfg, out)
		return cfg
	}
	delete(b.stamps, out)
	cmd := exec.Command(gobin, args...)
	cmd.Dir = dir
	cmd.Env = env.Environ
	b.goRuns++
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
	// The stamp was taken before the build: a file changed while it ran
	// differs from it next time. A fresh one could miss a change made in
	// the same clock tick, so the next start builds and stamps again.
	if stampErr == nil && !fresh {
		if b.stamps == nil {
			b.stamps = map[string]builtStamp{}
		}
		b.stamps[out] = builtStamp{sum: sum, bin: fileStamp(out)}
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
		b.stamps = nil
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
