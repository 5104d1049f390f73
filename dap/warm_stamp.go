//go:build !windows

package dap

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tetherdev/tether/internal/tuning"
)

// Build stamps: a warm Go start skips go build altogether when nothing the
// build can read has changed since the last successful prebuild of the
// same program. go build finds such a program up to date on its own, but
// only after loading the package graph and hashing its inputs, 250–300 ms
// of a warm start that BenchmarkDebugWarmStart (e2e/bench) measured at
// 0.56–0.59× of a cold one; a stamp is a walk of stat calls, a few ms for a
// small module. With stamps the bench's Go warm/cold ratio was 0.57, 0.47
// and 0.50 in three runs against 0.85, 0.52 and 0.56 without, each pair
// back to back on a shared, loaded 2-core machine (2026-12-05; the noise is
// as large as the gain). docs/debugging.md has the figures
// (TETHER_TUNING=no-buildstamps turns it off; --warm-adapters=false turns
// it off with the prebuild).
//
// A stamp is a hash of what the build is (go binary and its stat, the
// arguments, the directory, the whole environment, the go env file) and of
// the stat (size, mtime, ctime, mode, inode) of every file under the main
// module's root but VCS directories, plus the git files that say which
// commit is checked out (go build stamps it into the binary). Module cache
// dependencies are immutable per version, which go.mod and go.sum (in the
// walk) pin. A build that can read files the walk does not cover gets no
// stamp and always runs go: a go.work in effect, a replace pointing at a
// local directory, GOPATH mode, GOFLAGS naming other files or tools, a
// symlink to a directory, another VCS than git, or more than
// maxStampFiles files. Not covered, as go build's own check does not cover
// them either: C headers and libraries a cgo package includes.

// buildStampsOn is whether prebuilds are stamped (tuning.BuildStamps).
var buildStampsOn = tuning.On(tuning.BuildStamps)

// maxStampFiles bounds the walk: a module tree larger than this (a
// node_modules inside it, generated data) would cost more to stat on every
// start than the go build check it saves, so its builds always run go.
const maxStampFiles = 20000

// racyMargin: a file changed in the same clock tick as the walk that
// recorded it, again in that tick, keeps its stat and would be missed. As
// git's index does with "racily clean" entries, a walk that saw any file
// modified less than this before it began records nothing, so the next
// start builds (and records) again. It is wide, to cover file systems with
// coarse timestamps and clocks that differ from ours (network file
// systems).
const racyMargin = 2 * time.Second

// errNoStamp says why a build cannot be stamped; only tests read the
// reason.
var errNoStamp = errors.New("no build stamp")

// vcsDirs are skipped by the walk: go build does not read them as sources
// (git's state is stamped separately, other VCS are refused).
var vcsDirs = map[string]bool{".git": true, ".hg": true, ".svn": true, ".bzr": true, ".fossil": true, "_darcs": true, ".jj": true}

// delveOutput starts the name of the binary a delve debug launch builds
// into its working directory (`__debug_bin`, with a suffix since delve
// 1.21) and removes at its end: an IDE or a cold session debugging the
// same module writes one at every launch, which would make every stamp
// differ and fresh (BenchmarkDebugWarmStart, whose cold and bare runs
// debug the warm one's module, rebuilt on every warm start: Go warm/cold
// 0.51×, and 0.22× once the walk skipped it). go build reads no such
// file: a name starting with _ is no source of a package, and only an
// embed pattern matching it (`*`) would read it.
const delveOutput = "__debug_bin"

// goFlagsStampable are the GOFLAGS a stamp can cover: they change how the
// module's files are built, not which files outside it are read.
var goFlagsStampable = map[string]bool{"-mod": true, "-buildvcs": true, "-trimpath": true, "-tags": true, "-race": true, "-v": true}

// buildStamp fingerprints a go build of args run in dir with environ by
// gobin. now is when the walk began: fresh is true when a file changed
// within racyMargin of it (the stamp must not be recorded, but may be
// compared with a recorded one). err is set when the build can read what
// the stamp does not cover: it then always runs.
func buildStamp(gobin string, args []string, dir string, environ []string, now time.Time) (sum [32]byte, fresh bool, err error) {
	h := sha256.New()
	var buf []byte
	field := func(s string) { buf = append(append(buf, s...), 0) }
	var st unix.Stat_t
	statField := func(path string) error {
		if err := unix.Stat(path, &st); err != nil {
			field("absent")
			return err
		}
		buf = appendStat(buf, &st)
		if !olderThan(&st, now) {
			fresh = true
		}
		return nil
	}
	field(gobin)
	if statField(gobin) != nil {
		return sum, false, errNoStamp
	}
	field(dir)
	for _, a := range args {
		field(a)
	}
	for _, kv := range environ {
		field(kv)
	}

	getenv := func(k string) string { return lastValue(environ, k) }
	goenv, fileVals := goEnvFile(getenv)
	field(goenv)
	if goenv != "" {
		_ = statField(goenv)
		for _, kv := range fileVals {
			field(kv)
		}
	}
	// Each setting as go reads it: the environment, else the go env file.
	setting := func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return lastValue(fileVals, k)
	}
	if setting("GO111MODULE") == "off" {
		return sum, false, errNoStamp // GOPATH mode: packages outside the module
	}
	if !stampableGoFlags(setting("GOFLAGS")) {
		return sum, false, errNoStamp
	}
	if w := setting("GOWORK"); w != "off" && (w != "" || goWorkAbove(dir)) {
		return sum, false, errNoStamp
	}
	root := moduleRoot(dir)
	if root == "" {
		return sum, false, errNoStamp
	}
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || localReplace(mod) {
		return sum, false, errNoStamp
	}
	if !argsInside(args, dir, root) {
		return sum, false, errNoStamp
	}
	if setting("CGO_ENABLED") != "0" {
		// cgo's compiler is part of the build (go build hashes its version).
		cc := setting("CC")
		if cc == "" {
			cc = "gcc"
			if runtime.GOOS == "darwin" {
				cc = "clang"
			}
		}
		cc, _, _ = strings.Cut(cc, " ")
		if !filepath.IsAbs(cc) {
			cc = lookIn(getenv("PATH"), cc)
		}
		field("cc:" + cc)
		_ = statField(cc)
	}
	vcs, err := gitStateFiles(root)
	if err != nil {
		return sum, false, err
	}
	for _, p := range vcs {
		field(p)
		_ = statField(p)
	}
	h.Write(buf)
	buf = buf[:0]

	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if vcsDirs[d.Name()] && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), delveOutput) {
			return nil
		}
		if files++; files > maxStampFiles {
			return errNoStamp
		}
		field(path[len(root):])
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			// A link to a file is read through: its target's stat, and
			// where it points. A link to a directory would put a tree
			// outside the walk into the build.
			target, _ := os.Readlink(path)
			field(target)
			if unix.Stat(path, &st) != nil {
				field("dangling")
				return nil
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return errNoStamp
			}
		}
		buf = appendStat(buf, &st)
		if !olderThan(&st, now) {
			fresh = true
		}
		if len(buf) > 32<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
		return nil
	})
	if err != nil {
		return sum, false, errNoStamp
	}
	h.Write(buf)
	h.Sum(sum[:0])
	return sum, fresh, nil
}

// fileStamp is the stat of one file (the prebuilt binary), "" when it is
// missing.
func fileStamp(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	return string(appendStat(nil, &st))
}

func appendStat(b []byte, st *unix.Stat_t) []byte {
	for _, n := range []uint64{uint64(st.Size), uint64(st.Mtim.Nano()), uint64(st.Ctim.Nano()), uint64(st.Mode), uint64(st.Ino), uint64(st.Dev)} {
		b = binary.LittleEndian.AppendUint64(b, n)
	}
	return b
}

// olderThan says whether st was last modified racyMargin or more before now.
func olderThan(st *unix.Stat_t, now time.Time) bool {
	return time.Unix(0, st.Mtim.Nano()).Before(now.Add(-racyMargin))
}

// lastValue is k's value in a KEY=VALUE list, the last one winning as in
// an environment; "" when unset.
func lastValue(kvs []string, k string) string {
	v := ""
	for _, kv := range kvs {
		if rest, ok := strings.CutPrefix(kv, k+"="); ok {
			v = rest
		}
	}
	return v
}

// goEnvFile is the file `go env -w` writes (GOENV, else go's place under
// the user's config directory) and its KEY=VALUE lines; "" when off or
// unknown.
func goEnvFile(getenv func(string) string) (string, []string) {
	path := getenv("GOENV")
	if path == "off" {
		return "", nil
	}
	if path == "" {
		dir := getenv("XDG_CONFIG_HOME")
		switch {
		case runtime.GOOS == "darwin" && getenv("HOME") != "":
			dir = filepath.Join(getenv("HOME"), "Library", "Application Support")
		case dir == "" && getenv("HOME") != "":
			dir = filepath.Join(getenv("HOME"), ".config")
		case dir == "":
			return "", nil
		}
		path = filepath.Join(dir, "go", "env")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return path, nil
	}
	var kvs []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			kvs = append(kvs, strings.TrimSpace(k)+"="+strings.TrimSpace(v))
		}
	}
	return path, kvs
}

// stampableGoFlags says whether every flag in GOFLAGS is one a stamp
// covers; the others may name files or programs outside the module
// (-modfile, -overlay, -pgo, -toolexec, -C).
func stampableGoFlags(flags string) bool {
	for _, f := range strings.Fields(flags) {
		name, _, _ := strings.Cut(f, "=")
		name = "-" + strings.TrimLeft(name, "-")
		if !goFlagsStampable[name] {
			return false
		}
	}
	return true
}

// goWorkAbove says whether go would find a go.work from dir upward.
func goWorkAbove(dir string) bool {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return false
		}
		dir = up
	}
}

// argsInside says whether every file or directory the build's arguments
// name (past the flags: a path, relative to dir or absolute) lies in the
// module tree at root, which the walk covers. go build of a file outside
// it (a program at /tmp/x/main.go, built as command-line-arguments from a
// module elsewhere) reads what no stamp would see. Import paths are
// packages of the module or of the module cache, which go.mod and go.sum
// pin.
func argsInside(args []string, dir, root string) bool {
	for i, a := range args {
		if i > 0 && args[i-1] == "-o" {
			continue // the output, not an input
		}
		if strings.HasPrefix(a, "-") || !(a == "." || a == ".." || strings.HasPrefix(a, "./") || strings.HasPrefix(a, "../") || filepath.IsAbs(a)) {
			continue
		}
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if rel, err := filepath.Rel(root, filepath.Clean(p)); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return false
		}
	}
	return true
}

// localReplace says whether go.mod has a replace directive whose target is
// a directory (a path starting with ./, ../ or /, or any target without a
// version: only a directory may omit it). Conservative: a line it cannot
// read counts as one.
func localReplace(mod []byte) bool {
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(mod))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		// go.mod's lexer makes ( and ) tokens of their own: "replace(".
		line = strings.NewReplacer("(", " ( ", ")", " ) ").Replace(line)
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case inBlock && f[0] == ")":
			inBlock = false
			continue
		case f[0] == "replace" && len(f) == 2 && f[1] == "(":
			inBlock = true
			continue
		case f[0] == "replace":
			f = f[1:]
		case !inBlock:
			continue
		}
		i := slices.Index(f, "=>")
		if i < 0 {
			return true
		}
		target := f[i+1:]
		if len(target) != 2 {
			return true
		}
		p := strings.Trim(target[0], "\"`")
		if strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") || filepath.IsAbs(p) {
			return true
		}
	}
	return sc.Err() != nil
}

// gitStateFiles are the files of the git checkout holding root (found
// upward, as go build's VCS stamp finds it) that change with a commit or a
// checkout: HEAD, the index, packed-refs and the ref HEAD names. A
// checkout of another VCS is refused: go would stamp its state, which
// nothing here follows.
func gitStateFiles(root string) ([]string, error) {
	for dir := root; ; {
		for name := range vcsDirs {
			if name == ".git" {
				continue
			}
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				return nil, errNoStamp
			}
		}
		dotgit := filepath.Join(dir, ".git")
		if fi, err := os.Stat(dotgit); err == nil {
			gitdir, common := dotgit, dotgit
			if !fi.IsDir() { // a worktree or submodule: "gitdir: <path>"
				data, err := os.ReadFile(dotgit)
				p, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
				if err != nil || !ok {
					return nil, errNoStamp
				}
				gitdir = strings.TrimSpace(p)
				if !filepath.IsAbs(gitdir) {
					gitdir = filepath.Join(dir, gitdir)
				}
				common = gitdir
				if c, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
					common = strings.TrimSpace(string(c))
					if !filepath.IsAbs(common) {
						common = filepath.Join(gitdir, common)
					}
				}
			}
			files := []string{dotgit, filepath.Join(gitdir, "HEAD"), filepath.Join(gitdir, "index"), filepath.Join(common, "packed-refs")}
			if head, err := os.ReadFile(filepath.Join(gitdir, "HEAD")); err == nil {
				if ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref:"); ok {
					files = append(files, filepath.Join(common, filepath.FromSlash(strings.TrimSpace(ref))))
				}
			}
			return files, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return nil, nil
		}
		dir = up
	}
}

// lookIn finds an executable name in a PATH list, "" when absent.
func lookIn(path, name string) string {
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
