//go:build !windows

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tetherdev/tether/protocol"
)

// Tree is one directory tree agents work in through the file, search and
// git operations: a sandbox workspace's worktree, or the directory a
// bridge serves. Both call the same methods, so one implementation holds
// every rule about paths, caps and encodings.
//
// Every path an agent names is checked with CleanPath (cleanWritablePath
// for writes) and resolved through an os.Root opened on the tree, so no
// path reaches outside it, whatever symlinks it crosses: absolute paths,
// "..", NUL bytes, over-long paths and symlinks leading out all answer
// invalid_path.
//
// A Tree's methods are safe for concurrent use. Each call opens the
// directory afresh, so a tree that is removed and made again (an evicted
// workspace acquired anew) is seen as it is now. The Tree does not
// serialise writes: the sandbox runs a workspace's writes one at a time;
// on a bridge's root two writes of one file at once leave one of them.
type Tree struct {
	dir     string
	gitDir  string // "" lets git find the repository from dir
	readCap int
	engine  searcher
	git     *LocalGit
}

// TreeOptions configure NewTree; zero values take the defaults.
type TreeOptions struct {
	// ReadCap bounds the content one read-file returns; default
	// DefaultReadCap.
	ReadCap int
	// RgBin and GitBin name ripgrep and git; default from PATH. RgBin "-"
	// forces the Go search.
	RgBin, GitBin string
}

// NewTree serves the existing directory dir. Git finds the repository, if
// any, from dir upwards: dir may be a repository's top or a directory in
// it.
func NewTree(dir string, o TreeOptions) (*Tree, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: resolving %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("sandbox: %s is not a directory", abs)
	}
	if o.ReadCap <= 0 {
		o.ReadCap = DefaultReadCap
	}
	return &Tree{dir: abs, readCap: o.ReadCap, engine: newSearcher(o.RgBin), git: &LocalGit{Bin: o.GitBin}}, nil
}

// Dir returns the tree's absolute directory.
func (t *Tree) Dir() string { return t.dir }

// Whether an operation only reads the tree or changes it; see open.
const (
	reading = false
	writing = true
)

// open checks the path p an agent gave (CleanPath, or cleanWritablePath
// when write) and opens the tree as an os.Root to resolve it in. It
// returns the root, which the caller closes, and p relative to it.
func (t *Tree) open(p string, write bool) (*os.Root, string, error) {
	clean := CleanPath
	if write {
		clean = cleanWritablePath
	}
	rel, err := clean(p)
	if err != nil {
		return nil, "", err
	}
	r, err := os.OpenRoot(t.dir)
	if err != nil {
		return nil, "", protocol.Errorf(protocol.CodeWorkspaceNotFound, "the workspace directory is missing: %v", err)
	}
	return r, rel, nil
}

// openFile resolves p in the tree (for reading), opens it and stats it;
// op names the operation in errors. The caller closes the file, and
// checks its type: O_NONBLOCK keeps the open of a FIFO an agent made
// from waiting forever for a writer (it changes nothing for files and
// directories).
func (t *Tree) openFile(p, op string) (*os.File, fs.FileInfo, string, error) {
	root, rel, err := t.open(p, reading)
	if err != nil {
		return nil, nil, "", err
	}
	defer root.Close() // the file stays open without it
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, "", pathError(op, rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, "", pathError(op, rel, err)
	}
	return f, fi, rel, nil
}
