//go:build !windows

package dap

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// InferCommands suggests build and test commands from the files at root.
func InferCommands(root string) []InferredCommand {
	has := func(name string) bool {
		_, err := os.Stat(filepath.Join(root, name))
		return err == nil
	}
	var out []InferredCommand
	add := func(kind, cmd, reason string) {
		out = append(out, InferredCommand{Kind: kind, Command: cmd, Reason: reason})
	}
	if has("Makefile") || has("makefile") || has("GNUmakefile") {
		add("build", "make", "Makefile")
		add("test", "make test", "Makefile")
	}
	if has("go.mod") {
		add("build", "go build ./...", "go.mod")
		add("test", "go test ./...", "go.mod")
	}
	if has("package.json") {
		var pkg struct {
			Scripts map[string]string `json:"scripts"`
		}
		data, _ := os.ReadFile(filepath.Join(root, "package.json"))
		_ = json.Unmarshal(data, &pkg)
		if _, ok := pkg.Scripts["build"]; ok {
			add("build", "npm run build", "package.json")
		}
		if _, ok := pkg.Scripts["test"]; ok {
			add("test", "npm test", "package.json")
		}
		if len(pkg.Scripts) == 0 {
			add("build", "npm install", "package.json")
		}
	}
	for _, f := range []string{"pyproject.toml", "setup.py"} {
		if has(f) {
			add("build", "python3 -m pip install -e .", f)
			add("test", "python3 -m pytest", f)
			break
		}
	}
	if has("Cargo.toml") {
		add("build", "cargo build", "Cargo.toml")
		add("test", "cargo test", "Cargo.toml")
	}
	if has("CMakeLists.txt") {
		add("build", "cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug && cmake --build build", "CMakeLists.txt")
		add("test", "ctest --test-dir build", "CMakeLists.txt")
	}
	for _, pat := range []struct{ glob, cc string }{{"*.c", "gcc"}, {"*.cpp", "g++"}, {"*.cc", "g++"}} {
		files, _ := filepath.Glob(filepath.Join(root, pat.glob))
		slices.Sort(files)
		for i, f := range files {
			if i == 20 {
				break
			}
			name := filepath.Base(f)
			bin := strings.TrimSuffix(name, filepath.Ext(name))
			add("build", pat.cc+" -g -O0 -o "+bin+" "+name, name)
		}
	}
	return out
}
