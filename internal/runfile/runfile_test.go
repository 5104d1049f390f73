package runfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/runfile"
)

func TestWriteMakesAPrivateFileInAPrivateDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "run")
	path := filepath.Join(dir, "x.token")
	if err := runfile.Write(path, []byte("secret\n")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", p, st.Mode().Perm(), want)
		}
	}
	if err := runfile.Write(path, []byte("again\n")); err != nil {
		t.Fatalf("replacing: %v", err)
	}
	if raw, _ := os.ReadFile(path); string(raw) != "again\n" {
		t.Errorf("after replacing: %q", raw)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestWriteRefusesADirectoryOthersMayEnter(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := runfile.Write(filepath.Join(dir, "x.token"), []byte("t"))
	if err == nil || !strings.Contains(err.Error(), "0700") {
		t.Fatalf("Write in a 0755 directory: %v, want a refusal naming 0700", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.token")); err == nil {
		t.Error("the file was written anyway")
	}
}

func TestDirFollowsXDGRuntimeDir(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	if d, err := runfile.Dir(); err != nil || d != "/run/user/1000/tether" {
		t.Errorf("Dir() = %q, %v", d, err)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if d, err := runfile.Dir(); err != nil || !strings.HasSuffix(d, filepath.Join("tether", "run")) {
		t.Errorf("without XDG_RUNTIME_DIR: Dir() = %q, %v", d, err)
	}
}
