//go:build !windows

package dap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/internal/tuning"
)

// agedFiles writes files under root and dates them back, as files last
// edited a while before the session: a file changed less than two seconds
// before a build keeps it from being stamped (warm_stamp.go's racyMargin).
func agedFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		write(t, filepath.Join(root, name), body)
		age(t, filepath.Join(root, name), time.Minute)
	}
}

func age(t *testing.T, path string, ago time.Duration) {
	t.Helper()
	old := time.Now().Add(-ago)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

const goMod = "module addgo\n\ngo 1.21\n"

// goStampManager is a warm manager over a Go program in root (main.go and
// go.mod, aged), or over files when given.
func goStampManager(t *testing.T, files map[string]string, environ ...string) (*dap.Manager, string) {
	t.Helper()
	if !tuning.On(tuning.BuildStamps) {
		t.Skip("build stamps are off (TETHER_TUNING): every start runs go build")
	}
	root := t.TempDir()
	if files == nil {
		files = map[string]string{"main.go": goAdd, "go.mod": goMod}
	}
	agedFiles(t, root, files)
	m, err := dap.NewManager(dap.Config{Root: root, WarmAdapters: true, Environ: append(os.Environ(), environ...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	needAdapter(t, m, "delve")
	return m, root
}

// localAtBreakpoint starts program with a breakpoint at path:line, and
// returns the value of the local name where it stops; the session is
// stopped.
func localAtBreakpoint(t *testing.T, m *dap.Manager, program, path string, line int, name string) string {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	start, err := m.Start(ctx, dap.StartRequest{Language: "go", Program: program,
		Breakpoints: []dap.FileBreakpoints{{Path: path, Breakpoints: []dap.SourceBreakpoint{{Line: line}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID}); err != nil {
			t.Fatal(err)
		}
	}()
	s, err := m.Session(start.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stop == nil || snap.Stop.Reason != "breakpoint" || len(snap.Frames) == 0 || snap.Frames[0].Line != line {
		t.Fatalf("snapshot = stop %+v frames %+v, want the breakpoint at line %d", snap.Stop, snap.Frames, line)
	}
	for _, v := range snap.Locals {
		if v.Name == name {
			return v.Value
		}
	}
	t.Fatalf("no local %s in %+v", name, snap.Locals)
	return ""
}

func wantGoBuilds(t *testing.T, m *dap.Manager, want int, after string) {
	t.Helper()
	if got := m.GoBuilds(); got != want {
		t.Fatalf("go build ran %d times after %s, want %d", got, after, want)
	}
}

// The point of the stamp: a second start of an unchanged program runs no
// go build, and still stops where the first did.
func TestGoWarmStartOfAnUnchangedProgramRunsNoGoBuild(t *testing.T) {
	m, _ := goStampManager(t, nil)
	if v := localAtBreakpoint(t, m, ".", "main.go", 7, "total"); v != "5" {
		t.Fatalf("total = %q, want 5", v)
	}
	wantGoBuilds(t, m, 1, "the first start")
	if v := localAtBreakpoint(t, m, ".", "main.go", 7, "total"); v != "5" {
		t.Fatalf("total = %q, want 5", v)
	}
	wantGoBuilds(t, m, 1, "a second start of the unchanged program")
}

// An edit that keeps the file's size is seen by its mtime: the program is
// built again and runs the new code, and the start after that is stamped
// anew.
func TestGoWarmStartAfterASameSizeEditRebuilds(t *testing.T) {
	m, root := goStampManager(t, nil)
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 1, "the first start")

	edited := strings.Replace(goAdd, "a + b", "a - b", 1)
	if len(edited) != len(goAdd) || edited == goAdd {
		t.Fatal("the edit must keep the size")
	}
	write(t, filepath.Join(root, "main.go"), edited)
	age(t, filepath.Join(root, "main.go"), 30*time.Second)
	if v := localAtBreakpoint(t, m, ".", "main.go", 7, "total"); v != "-1" {
		t.Fatalf("total = %q after the edit, want -1 (the new code)", v)
	}
	wantGoBuilds(t, m, 2, "an edit of main.go")
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 2, "a start after the rebuild")
}

func TestGoWarmStartAfterAGoModEditRebuilds(t *testing.T) {
	m, root := goStampManager(t, nil)
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 1, "the first start")
	agedFiles(t, root, map[string]string{"go.mod": strings.Replace(goMod, "go 1.21", "go 1.22", 1)})
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 2, "an edit of go.mod")
}

// A go.work above the module puts its other modules into the build, which
// the stamp does not cover: every start runs go build.
func TestGoWarmStartUnderAGoWorkAlwaysBuilds(t *testing.T) {
	m, _ := goStampManager(t, map[string]string{
		"go.work":     "go 1.21\n\nuse ./app\n",
		"app/go.mod":  goMod,
		"app/main.go": goAdd,
	})
	localAtBreakpoint(t, m, "app", "app/main.go", 7, "total")
	localAtBreakpoint(t, m, "app", "app/main.go", 7, "total")
	wantGoBuilds(t, m, 2, "two starts under a go.work")
}

const goUsesLib = `package main

import "example.com/lib"

func add(a, b int) int {
	total := lib.Twice(a) + b
	return total
}

func main() { println(add(2, 3)) }
`

// A replace by a local directory puts that directory, outside the module,
// into the build: every start runs go build, and so sees its edits.
func TestGoWarmStartWithALocalReplaceAlwaysBuilds(t *testing.T) {
	m, root := goStampManager(t, map[string]string{
		"app/go.mod":  goMod + "\nrequire example.com/lib v0.0.0\n\nreplace example.com/lib => ../lib\n",
		"app/main.go": goUsesLib,
		"lib/go.mod":  "module example.com/lib\n\ngo 1.21\n",
		"lib/lib.go":  "package lib\n\nfunc Twice(x int) int { return 2 * x }\n",
	})
	if v := localAtBreakpoint(t, m, "app", "app/main.go", 7, "total"); v != "7" {
		t.Fatalf("total = %q, want 7", v)
	}
	agedFiles(t, root, map[string]string{"lib/lib.go": "package lib\n\nfunc Twice(x int) int { return 3 * x }\n"})
	if v := localAtBreakpoint(t, m, "app", "app/main.go", 7, "total"); v != "9" {
		t.Fatalf("total = %q after lib changed, want 9", v)
	}
	wantGoBuilds(t, m, 2, "two starts with a local replace")
}

// The environment is part of the build: a variable the build reads
// (CGO_ENABLED) or a setting written by go env -w (GOFLAGS) builds again.
func TestGoWarmStartAfterAnEnvChangeRebuilds(t *testing.T) {
	goenv := filepath.Join(t.TempDir(), "go.env")
	m, _ := goStampManager(t, nil, "GOENV="+goenv)
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 1, "the first start")

	awaitWarm(t, m, "delve") // nothing reads the environment meanwhile
	m.Setenv("CGO_ENABLED=0")
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 2, "CGO_ENABLED changed")

	write(t, goenv, "GOFLAGS=-tags=stamp\n")
	age(t, goenv, time.Minute)
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 3, "GOFLAGS set in the go env file")
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 3, "a start with the same environment")
}

func TestGoWarmStartAfterThePrebuiltBinaryIsGoneRebuilds(t *testing.T) {
	m, _ := goStampManager(t, nil)
	localAtBreakpoint(t, m, ".", "main.go", 7, "total")
	wantGoBuilds(t, m, 1, "the first start")
	bins, err := filepath.Glob(filepath.Join(m.PrebuiltDir(), "*"))
	if err != nil || len(bins) == 0 {
		t.Fatalf("prebuilt binaries in %q: %v %v", m.PrebuiltDir(), bins, err)
	}
	for _, b := range bins {
		if err := os.Remove(b); err != nil {
			t.Fatal(err)
		}
	}
	if v := localAtBreakpoint(t, m, ".", "main.go", 7, "total"); v != "5" {
		t.Fatalf("total = %q, want 5", v)
	}
	wantGoBuilds(t, m, 2, "the binary was deleted")
}
