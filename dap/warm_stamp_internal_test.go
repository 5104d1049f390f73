//go:build !windows

package dap

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// stampRoot is a module (go.mod, main.go) dated a minute back.
func stampRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	old := time.Now().Add(-time.Minute)
	for name, body := range map[string]string{"go.mod": "module m\n\ngo 1.21\n", "main.go": "package main\n\nfunc main() {}\n"} {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	gobin := root + ".go"
	if err := os.WriteFile(gobin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(gobin, old, old); err != nil {
		t.Fatal(err)
	}
	return root
}

func stampOf(t *testing.T, root string, environ ...string) ([32]byte, bool, error) {
	t.Helper()
	gobin := root + ".go" // stat only: any dated file stands for it (stampRoot's)
	return buildStamp(gobin, []string{"build", "-o", "out", root}, root, append(environ, "HOME="+root, "GOENV=off"), time.Now())
}

func TestBuildStampOfAFileJustWrittenIsFresh(t *testing.T) {
	root := stampRoot(t)
	before, fresh, err := stampOf(t, root)
	if err != nil || fresh {
		t.Fatalf("aged module: fresh %v err %v, want a stamp to record", fresh, err)
	}
	if err := os.WriteFile(filepath.Join(root, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, fresh, err := stampOf(t, root)
	if err != nil || !fresh {
		t.Fatalf("just rewritten: fresh %v err %v, want fresh", fresh, err)
	}
	if after == before {
		t.Fatal("a rewrite with the same content and size kept the stamp")
	}
}

// A delve debug launch of the same module (an IDE's, a cold session's)
// writes its binary into the module and removes it at its end; go build
// never reads it, so the stamp neither changes nor turns fresh.
func TestBuildStampIgnoresDelvesOutputBinaries(t *testing.T) {
	root := stampRoot(t)
	before, _, err := stampOf(t, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"__debug_bin", "__debug_bin3298754"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("\x7fELF"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	after, fresh, err := stampOf(t, root)
	if err != nil || fresh || after != before {
		t.Fatalf("with delve's binaries in the module: same stamp %v, fresh %v, err %v; want the same stamp, not fresh", after == before, fresh, err)
	}
	// Any other new file is in the stamp.
	if err := os.WriteFile(filepath.Join(root, "_debug_bin"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if other, _, _ := stampOf(t, root); other == before {
		t.Fatal("a new file of another name kept the stamp")
	}
}

func TestBuildStampDiffersWithTheEnvironment(t *testing.T) {
	root := stampRoot(t)
	a, _, _ := stampOf(t, root)
	b, _, _ := stampOf(t, root, "GOFLAGS=-tags=x")
	if a == b {
		t.Fatal("GOFLAGS=-tags=x kept the stamp")
	}
}

// Builds that can read files outside the module tree get no stamp.
func TestBuildStampRefusesBuildsReadingOutsideTheModule(t *testing.T) {
	for name, tc := range map[string]struct {
		setup   func(root string) error
		environ []string
	}{
		"GOPATH mode":      {environ: []string{"GO111MODULE=off"}},
		"GOFLAGS -modfile": {environ: []string{"GOFLAGS=-modfile=/elsewhere/go.mod"}},
		"GOFLAGS -overlay": {environ: []string{"GOFLAGS=-mod=mod -overlay=/x.json"}},
		"GOWORK set":       {environ: []string{"GOWORK=/elsewhere/go.work"}},
		"go.work in module": {setup: func(root string) error {
			return os.WriteFile(filepath.Join(root, "go.work"), []byte("go 1.21\n\nuse .\n"), 0o644)
		}},
		"link to a directory": {setup: func(root string) error {
			return os.Symlink(t.TempDir(), filepath.Join(root, "pkg"))
		}},
		"mercurial checkout": {setup: func(root string) error { return os.Mkdir(filepath.Join(root, ".hg"), 0o755) }},
		"local replace": {setup: func(root string) error {
			return os.WriteFile(filepath.Join(root, "go.mod"), []byte("module m\n\ngo 1.21\n\nreplace x.org/y => ../y\n"), 0o644)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			root := stampRoot(t)
			if tc.setup != nil {
				if err := tc.setup(root); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := stampOf(t, root, tc.environ...); !errors.Is(err, errNoStamp) {
				t.Fatalf("err = %v, want errNoStamp", err)
			}
		})
	}
	if _, _, err := stampOf(t, stampRoot(t), "GOFLAGS=-mod=mod -trimpath", "GOWORK=off"); err != nil {
		t.Fatalf("flags that read nothing outside: %v", err)
	}
}

func TestLocalReplace(t *testing.T) {
	for mod, want := range map[string]bool{
		"module m\n": false,
		"module m\nreplace x.org/y => x.org/z v1.2.3\n":                           false,
		"module m\nreplace x.org/y v1.0.0 => x.org/z v1.2.3 // ok\n":              false,
		"module m\nreplace x.org/y => ../y\n":                                     true,
		"module m\nreplace x.org/y => /abs/y\n":                                   true,
		"module m\nreplace (\n\tx.org/a => x.org/b v1.0.0\n\tx.org/y => ./y\n)\n": true,
		"module m\nreplace (\n\tx.org/a => x.org/b v1.0.0\n)\n":                   false,
		"module m\nreplace x.org/y => y\n":                                        true, // no version: a directory
		"module m\nreplace x.org/y\n":                                             true, // unreadable: counted
		"module m\nreplace(\n\tx.org/y => ../y\n)\n":                              true, // ( is a token of its own
		"module m\nreplace(x.org/y => ../y)\n":                                    true,
		"module m\nreplace(\n\tx.org/a => x.org/b v1.0.0\n)\n":                    false,
	} {
		if got := localReplace([]byte(mod)); got != want {
			t.Errorf("localReplace(%q) = %v, want %v", mod, got, want)
		}
	}
}

// A build's file arguments must lie in the module tree the stamp walks.
func TestArgsInsideTheModule(t *testing.T) {
	root := "/w/mod"
	for _, tc := range []struct {
		args []string
		dir  string
		want bool
	}{
		{[]string{"build", "-o", "/tmp/out", "-gcflags=all=-N -l", "."}, root, true},
		{[]string{"build", "-o", "/tmp/out", "./cmd/x"}, root, true},
		{[]string{"build", "-o", "/tmp/out", "/w/mod/cmd/x/main.go"}, root, true},
		{[]string{"build", "-o", "/tmp/out", "example.com/m/cmd/x"}, root, true},
		{[]string{"build", "-o", "/tmp/out", "/tmp/x/main.go"}, root, false},
		{[]string{"build", "-o", "/tmp/out", "../other"}, root, false},
		{[]string{"build", "-o", "/tmp/out", ".."}, root + "/sub", true},
		{[]string{"build", "-o", "/tmp/out", "/w/module2/main.go"}, root, false},
	} {
		if got := argsInside(tc.args, tc.dir, root); got != tc.want {
			t.Errorf("argsInside(%q, %s) = %v, want %v", tc.args, tc.dir, got, tc.want)
		}
	}
}

// FuzzLocalReplace: any go.mod text is read without panicking, and one
// with no "=>" has no replace to a directory unless a replace line is
// unreadable.
func FuzzLocalReplace(f *testing.F) {
	f.Add([]byte("module m\nreplace x.org/y => ../y\n"))
	f.Add([]byte("replace (\n\tx => y v1\n)\n"))
	f.Add([]byte("replace (\n"))
	f.Fuzz(func(t *testing.T, mod []byte) {
		_ = localReplace(mod)
	})
}
