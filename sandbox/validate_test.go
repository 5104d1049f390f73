//go:build !windows

package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

func TestParseRepo(t *testing.T) {
	for _, tc := range []struct{ in, key string }{
		{"https://github.com/tetherdev/tether.git", "github.com/tetherdev/tether"},
		{"https://gitlab.com/group/sub/proj", "gitlab.com/group/sub/proj"},
		{"ssh://git@github.com/o/r.git", "github.com/o/r"},
		{"git@github.com:o/r.git", "github.com/o/r"},
		{"https://example.com:8443/o/r", "example.com_8443/o/r"},
	} {
		r, err := sandbox.ParseRepo(tc.in)
		if err != nil || r.Key() != tc.key {
			t.Errorf("ParseRepo(%q) = %q, %v; want %q", tc.in, r.Key(), err, tc.key)
		}
	}
	a, _ := sandbox.ParseRepo("/tmp/a/origin.git")
	b, _ := sandbox.ParseRepo("file:///tmp/b/x/a/origin.git")
	if a.Host != "local" || a.Name != "origin" || a.Key() == b.Key() {
		t.Errorf("local repos: %+v %+v", a, b)
	}
	for _, bad := range []string{"", "-x", "ext::sh -c x", "https://u:p@github.com/o/r", "https://github.com/o", "https://github.com/../r",
		"relative/x", "/tmp/../etc", "https://github.com/o/r?x=1", "git@github.com:-o/r", "file://host/tmp/x", "https://github.com/o/r\nx"} {
		if _, err := sandbox.ParseRepo(bad); err == nil {
			t.Errorf("ParseRepo(%q) accepted", bad)
		} else if c := codeOf(err); c != protocol.CodeInvalidRef {
			t.Errorf("ParseRepo(%q): code %q", bad, c)
		}
	}
}

// TestValidateRefAgreesWithGit checks that every ref ValidateRef accepts,
// git accepts too (ValidateRef is the stricter of the two).
func TestValidateRefAgreesWithGit(t *testing.T) {
	for _, ref := range []string{"main", "feature/x", "v1.2.3", "agent/edits-c1", "a..b", "x\ny", "--upload-pack=x", "a.lock", "a/.b", "a//b", "a/", "@", "a@{1}", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[", `a\b`, "a.", ".a", "HEAD"} {
		ours := sandbox.ValidateRef(ref) == nil
		gits := exec.Command("git", "check-ref-format", "refs/heads/"+ref).Run() == nil
		if ours && !gits {
			t.Errorf("%q: ValidateRef accepts what git refuses", ref)
		}
		if ours && strings.HasPrefix(ref, "-") {
			t.Errorf("%q: accepted a leading '-'", ref)
		}
	}
}

func FuzzValidateRef(f *testing.F) {
	for _, s := range []string{"main", "feature/x", "--upload-pack=x", "a..b", "x\ny", "a.lock", "@{", "v1.0", "a/b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		if sandbox.ValidateRef(ref) != nil {
			return
		}
		if strings.HasPrefix(ref, "-") || strings.ContainsAny(ref, "\n\r\x00 ") || strings.Contains(ref, "..") {
			t.Fatalf("accepted %q", ref)
		}
		if err := exec.Command("git", "check-ref-format", "refs/heads/"+ref).Run(); err != nil {
			t.Fatalf("accepted %q, which git refuses", ref)
		}
	})
}

func FuzzResolvePath(f *testing.F) {
	dir := f.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "outside"), []byte("secret"), 0o644); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink("../outside", filepath.Join(ws, "link")); err != nil {
		f.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "sub", "etc")); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"a", "../outside", "/etc/passwd", "link", "sub/etc/passwd", "sub/../link", "./sub//x", "a\x00b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := sandbox.CleanPath(p)
		if err != nil {
			if codeOf(err) != protocol.CodeInvalidPath {
				t.Fatalf("CleanPath(%q): code %q", p, codeOf(err))
			}
			return
		}
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "/../") || strings.HasSuffix(rel, "/..") {
			t.Fatalf("CleanPath(%q) = %q leaves the worktree", p, rel)
		}
		root, err := os.OpenRoot(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if data, err := root.ReadFile(rel); err == nil && string(data) == "secret" {
			t.Fatalf("%q read a file outside the worktree", p)
		}
	})
}
