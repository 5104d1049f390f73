//go:build !windows

package dap

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const loaderList = "\tlinux-vdso.so.1 (0x00007f47fbc28000)\n" +
	"\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f0a1e800000)\n" +
	"\tlibgone.so.1 => not found\n" +
	"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f47fba30000)\n" +
	"\t/lib64/ld-linux-x86-64.so.2 (0x00007f47fbc2a000)\n"

func TestParseLoaderListKeepsResolvedLibraries(t *testing.T) {
	got := parseLoaderList([]byte(loaderList))
	want := []string{"/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libc.so.6"}
	if !slices.Equal(got, want) {
		t.Fatalf("parseLoaderList = %q, want %q", got, want)
	}
}

func TestParseLoaderListIsBounded(t *testing.T) {
	var b strings.Builder
	for range 2 * maxPreloadModules {
		b.WriteString("\tlibx.so => /lib/libx.so (0x1)\n")
	}
	if got := parseLoaderList([]byte(b.String())); len(got) != maxPreloadModules {
		t.Fatalf("parseLoaderList kept %d libraries, want %d", len(got), maxPreloadModules)
	}
}

func TestPreloadableRefusesWhatAnLLDBCommandWouldReadOtherwise(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "prog")
	writeFile(t, ok)
	for _, name := range []string{"a\"b", "a`b", "a\\b", "a'b", "a$b", "a\nb"} {
		p := filepath.Join(dir, name)
		writeFile(t, p)
		if got := preloadable(map[string]any{"request": "launch", "program": p}); got != "" {
			t.Errorf("preloadable(%q) = %q, want none", p, got)
		}
	}
	for _, cfg := range []map[string]any{
		{"request": "attach", "program": ok},
		{"request": "launch", "program": "prog"},
		{"request": "launch", "program": dir},
		{"request": "launch", "program": filepath.Join(dir, "missing")},
	} {
		if got := preloadable(cfg); got != "" {
			t.Errorf("preloadable(%v) = %q, want none", cfg, got)
		}
	}
	if got := preloadable(map[string]any{"request": "launch", "program": ok}); got != ok {
		t.Errorf("preloadable(%q) = %q", ok, got)
	}
}

func writeFile(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseLoaderList: whatever a loader prints, the paths kept are
// absolute, bounded in number, and never the vdso or "not found".
func FuzzParseLoaderList(f *testing.F) {
	f.Add([]byte(loaderList))
	f.Add([]byte("\tstatically linked\n"))
	f.Add([]byte(" => \n => / (0x\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		libs := parseLoaderList(out)
		if len(libs) > maxPreloadModules {
			t.Fatalf("%d libraries", len(libs))
		}
		for _, l := range libs {
			if !filepath.IsAbs(l) || strings.Contains(l, "\n") {
				t.Fatalf("kept %q", l)
			}
		}
	})
}

// Only a system dynamic loader is run to list a program's libraries: a
// program may name any file as its interpreter.
func TestSystemLoaderIsTheOnlyInterpreterRun(t *testing.T) {
	if _, ok := systemLoader("/lib64/ld-linux-x86-64.so.2"); !ok {
		if _, err := os.Stat("/lib64/ld-linux-x86-64.so.2"); err == nil {
			t.Error("the system's loader /lib64/ld-linux-x86-64.so.2 was refused")
		}
	}
	dir := t.TempDir()
	own := filepath.Join(dir, "ld-linux-x86-64.so.2")
	if err := os.WriteFile(own, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, interp := range []string{own, "/bin/sh", "/usr/bin/env", "ld-linux-x86-64.so.2", "", "/lib/nothing-here.so"} {
		if real, ok := systemLoader(interp); ok {
			t.Errorf("systemLoader(%q) = %q, want refused", interp, real)
		}
	}
}
