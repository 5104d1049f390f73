//go:build !windows

package dap

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tetherdev/tether/internal/tuning"
)

// warmPreparer is an adapter that can do part of the next launch's work in
// a warm adapter while it waits, once initialize is answered. last is the
// launch configuration of the session whose end made the warm adapter (the
// best guess at the next one). What it does must leave nothing the
// session could see: the warm adapter behaves as a cold one would. It
// returns an error only when the adapter is no longer usable (its
// connection ended, or it is still busy when ctx ends); a preparation that
// merely did not work is no error.
type warmPreparer interface {
	prepareWarm(ctx context.Context, c *Client, last map[string]any) error
}

var _ warmPreparer = lldbDAP{}

// lldbPreloadOn is whether warm lldb-daps preload (tuning.LLDBPreload).
var lldbPreloadOn = tuning.On(tuning.LLDBPreload)

// lldbPreloadWait bounds a warm lldb-dap's preload: a program with a lot
// of debug info may take long to index, and a warm adapter still busy is
// not offered.
const lldbPreloadWait = 20 * time.Second

// prepareWarm preloads the last session's program and the libraries it
// loads into lldb's shared module cache. lldb keeps every module it has
// read (symbol table, DWARF index, line tables) in one process-wide list
// that later targets reuse while the file is unchanged, matched by the path
// the process names it with (as the dynamic loader resolved it: a library
// preloaded as /usr/lib/x86_64-linux-gnu/libc.so.6 is not reused for
// /lib/x86_64-linux-gnu/libc.so.6), its modification time and build id. So
// a warm lldb-dap creates a target of the program, adds the libraries the
// system's dynamic loader lists for it (preloadModules), looks up a line
// of a file that does not exist (which reads every compile unit's line
// table, as resolving the session's first breakpoint would) and deletes
// the target: the launch finds its modules read and indexed. A
// program rebuilt since is read again (lldb sees it changed); its
// libraries still come from the cache. The commands run through evaluate
// in repl context, whose results go only into the response (no output
// event; make drops any event said meanwhile); the deleted target leaves
// the debugger with no target, as a new one has, so the launch's target is
// #0 and its breakpoints start at 1. The first target also initializes
// lldb's Python, which a cold launch pays for.
//
// From lldb's own timers (log timers) in a cold C launch with lldb-dap 19
// and libc6-dbg installed, ~400 ms went to indexing DWARF (libc's, most of
// it) while running to the breakpoint and ~400 ms to initializing Python;
// both move into the wait. BenchmarkDebugWarmStart (e2e/bench,
// BENCH_LANGS=C) measured C's warm/cold at 0.37, 0.37 and 0.35 with the
// preload against 0.76, 0.67 and 0.65 without (TETHER_TUNING=
// no-lldbpreload), three back-to-back pairs on a shared 2-core machine,
// 2026-12-05; the warm lldb-dap holds ~45 MB more (168 MB resident).
// docs/debugging.md has the figures and where the rest of a start goes.
func (lldbDAP) prepareWarm(ctx context.Context, c *Client, last map[string]any) error {
	prog := preloadable(last)
	if prog == "" || !lldbPreloadOn {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, lldbPreloadWait)
	defer cancel()
	cmds := []string{`target create "` + prog + `"`}
	for _, lib := range preloadModules(ctx, prog) {
		cmds = append(cmds, `target modules add "`+lib+`"`)
	}
	cmds = append(cmds, "image lookup --file tether-warm-preload.c --line 1", "target delete --all")
	for _, cmd := range cmds {
		// "`" makes lldb-dap run the expression as an lldb command
		// whatever its repl mode. A command that fails is answered with
		// its error in the result (or a failed response), and the next
		// still runs: each of them fails without a target rather than
		// falling back on lldb's dummy target, whose settings and
		// breakpoints every later target copies (so no breakpoint set
		// here, which would), and target delete leaves no target either
		// way.
		err := c.Do(ctx, "evaluate", map[string]any{"expression": "`" + cmd, "context": "repl"}, nil)
		if err != nil && !isResponseError(err) {
			return fmt.Errorf("preloading %s: %w", prog, err)
		}
	}
	return nil
}

// maxPreloadModules bounds the libraries preloaded for one program.
const maxPreloadModules = 32

// preloadModules is the libraries the dynamic loader maps for prog, named
// as it names them (so as lldb will), and the loader itself (by its real
// path, as lldb names it): the loader prog names, asked to list them
// (ld.so --list, what ldd does). Only a system loader is run (systemLoader):
// a program could name any file as its interpreter, and what it names runs
// at a refill, not at a launch the user asked for; in list mode the loader
// maps the libraries and runs none of their code, nor prog's. None for a
// static program, another interpreter, or a loader that cannot list.
func preloadModules(ctx context.Context, prog string) []string {
	f, err := elf.Open(prog)
	if err != nil {
		return nil
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
			if err == nil {
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
	}
	f.Close()
	real, ok := systemLoader(interp)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, real, "--list", prog)
	cmd.WaitDelay = time.Second // a child holding stdout does not hold the wait
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	libs := append(parseLoaderList(out), real)
	return slices.DeleteFunc(libs, func(p string) bool { return preloadablePath(p) == "" })
}

// systemLoader returns the real path of interp when it is a dynamic
// loader of the system: glibc's or musl's (ld-linux*.so*, ld64.so*,
// ld-musl-*.so*, ld.so*) in a system library directory.
func systemLoader(interp string) (string, bool) {
	if !filepath.IsAbs(interp) {
		return "", false
	}
	real, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return "", false
	}
	base := filepath.Base(real)
	loader := strings.HasPrefix(base, "ld-linux") || strings.HasPrefix(base, "ld64.so") ||
		strings.HasPrefix(base, "ld-musl-") || strings.HasPrefix(base, "ld.so") || strings.HasPrefix(base, "ld-2.")
	if !loader || !strings.Contains(base, ".so") {
		return "", false
	}
	for _, dir := range []string{"/lib/", "/lib64/", "/lib32/", "/usr/lib/", "/usr/lib64/", "/usr/lib32/"} {
		if strings.HasPrefix(real, dir) {
			return real, true
		}
	}
	return "", false
}

// parseLoaderList reads ld.so --list's output: the "name => /path (addr)"
// lines' paths, at most maxPreloadModules; the vdso, the loader's own line
// and libraries not found are left out.
func parseLoaderList(out []byte) []string {
	var libs []string
	for line := range strings.SplitSeq(string(out), "\n") {
		_, rest, ok := strings.Cut(line, " => ")
		if !ok {
			continue
		}
		if i := strings.LastIndex(rest, " (0x"); i >= 0 {
			rest = rest[:i]
		}
		if filepath.IsAbs(rest) && len(libs) < maxPreloadModules {
			libs = append(libs, rest)
		}
	}
	return libs
}

// preloadable is the program of a launch configuration that prepareWarm
// can name in an lldb command: an absolute path to a regular file, without
// the characters lldb's command line would read as quoting or expression
// substitution. "" otherwise (an attach, a path lldb would parse
// differently).
func preloadable(cfg map[string]any) string {
	if cfg["request"] != "launch" {
		return ""
	}
	p, _ := cfg["program"].(string)
	return preloadablePath(p)
}

// preloadablePath is p if it is a regular file at an absolute path that an
// lldb command can name in double quotes, else "".
func preloadablePath(p string) string {
	if !filepath.IsAbs(p) || strings.ContainsAny(p, "\"\\`'$") || strings.ContainsFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return ""
	}
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return p
}

func isResponseError(err error) bool {
	var re *ResponseError
	return errors.As(err, &re)
}
