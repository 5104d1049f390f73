package broker_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The broker's house rules, checked so that they stay true: the routing
// core and its rooms never depend on the workspace side, and no file or
// package grows past what a newcomer can read (docs/architecture.md).

func TestBrokerImportsNothingOfTheWorkspaceSide(t *testing.T) {
	for pkg, banned := range map[string][]string{
		"./...":  {"/bridge", "/dap", "/terminal", "/sandbox", "/mcp"},
		"../mcp": {"/bridge"},
	} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for dep := range strings.FieldsSeq(string(out)) {
			for _, b := range banned {
				if strings.HasPrefix(dep, "github.com/tetherdev/tether") && (strings.HasSuffix(dep, b) || strings.Contains(dep, b+"/")) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

func TestBrokerFilesAndPackagesStaySmall(t *testing.T) {
	const maxFile, maxPackage = 600, 3000
	perPackage := map[string]int{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := bytes.Count(b, []byte("\n"))
		if n > maxFile {
			t.Errorf("%s has %d lines, over %d", path, n, maxFile)
		}
		perPackage[filepath.Dir(path)] += n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, n := range perPackage {
		if n > maxPackage {
			t.Errorf("package broker/%s has %d non-test lines, over %d", dir, n, maxPackage)
		}
	}
	if len(perPackage) < 5 {
		t.Fatalf("walked %d packages under broker/: not the broker's tree?", len(perPackage))
	}
}
