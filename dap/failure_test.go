//go:build !windows

package dap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// goModuleWorkspace makes a root whose Go program lives in its own module
// in the subdirectory goapp, with main.go holding src.
func goModuleWorkspace(t *testing.T, src string) string {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, "goapp", "go.mod"), "module example.com/goapp\n\ngo 1.22\n")
	write(t, filepath.Join(root, "goapp", "main.go"), src)
	return root
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const goPanics = `package main

func main() {
	var m map[string]int
	m["a"] = 1
}
`

// The case: a Go program whose module is a subdirectory of the
// root launches without a cwd, because delve builds in the module root;
// the program itself still runs in the root (its default cwd).
func TestGoInModuleSubdirectoryLaunchesWithoutCwd(t *testing.T) {
	root := goModuleWorkspace(t, goPanics)
	m := newManager(t, root)
	needAdapter(t, m, "delve")
	res, err := m.Start(ctxFor(t, 90*time.Second), dap.StartRequest{Language: "go", Program: "goapp"})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	s, err := m.Session(res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctxFor(t, 30*time.Second), dap.SnapshotRequest{SessionID: res.SessionID, WaitTimeoutMS: 20000})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// It ran: it stopped at its panic.
	if snap.Stop == nil || snap.Stop.Reason != "exception" {
		t.Fatalf("stop = %+v, want the panic", snap.Stop)
	}
}

// A Go program that does not compile: the launch failure holds the
// compiler's message (file:line: error), not delve's "check the debug
// console", and names the next step.
func TestGoSyntaxErrorLaunchFailureHasCompilerMessage(t *testing.T) {
	root := goModuleWorkspace(t, "package main\n\nfunc main() {\n\tx := 1 +\n}\n")
	m := newManager(t, root)
	needAdapter(t, m, "delve")
	start := time.Now()
	_, err := m.Start(ctxFor(t, 90*time.Second), dap.StartRequest{Language: "go", Program: "goapp"})
	if err == nil {
		t.Fatal("a program that does not compile started")
	}
	if code(err) != protocol.CodeInvalidPayload {
		t.Errorf("code = %q, want invalid_payload: %v", code(err), err)
	}
	msg := err.Error()
	for _, want := range []string{"main.go:5:1: syntax error", "the debug adapter printed:", "next step: the Go program does not compile"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure lacks %q:\n%s", want, msg)
		}
	}
	if len(msg) > 6000 {
		t.Errorf("the failure is %d bytes, want it bounded", len(msg))
	}
	t.Logf("answered in %v:\n%s", time.Since(start), msg)
}

// A Go directory without any go.mod: the failure says so and how to fix it.
func TestGoWithoutModuleLaunchFailureSaysInitModule(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "nomod", "main.go"), "package main\n\nfunc main() {}\n")
	m := newManager(t, root)
	needAdapter(t, m, "delve")
	_, err := m.Start(ctxFor(t, 90*time.Second), dap.StartRequest{Language: "go", Program: "nomod"})
	if err == nil {
		t.Fatal("started without a module")
	}
	for _, want := range []string{"go.mod file not found", "go mod init"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the failure lacks %q:\n%v", want, err)
		}
	}
}

// A Python launch of a module that does not exist: the answer (whether
// the start fails or the session ends at once) shows the ImportError.
func TestPythonMissingModuleShowsImportError(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	res, err := m.Start(ctxFor(t, 60*time.Second), dap.StartRequest{Config: map[string]any{
		"type": "python", "request": "launch", "name": "missing", "module": "no_such_module_tether",
	}})
	if err == nil {
		// The start can win the race with the program's end: the session's
		// end then carries it.
		s, serr := m.Session(res.SessionID)
		if serr != nil {
			t.Fatal(serr)
		}
		_, err = s.Snapshot(ctxFor(t, 30*time.Second), dap.SnapshotRequest{SessionID: res.SessionID, WaitTimeoutMS: 20000})
		if err == nil {
			t.Fatal("a missing module launched and stopped")
		}
	}
	t.Logf("%v", err)
	for _, want := range []string{"No module named no_such_module_tether", "next step: python cannot import no_such_module_tether"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the answer lacks %q:\n%v", want, err)
		}
	}
}

// A request the adapter refuses is answered invalid_payload with the
// adapter's own message, at once (not internal_error).
func TestRefusedRequestIsInvalidPayloadWithAdaptersMessage(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "div.py"), "def ratio(a, b):\n    return a / b\n\nprint(ratio(1, 0))\n")
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	res, err := m.Start(ctxFor(t, 60*time.Second), dap.StartRequest{Language: "python", Program: "div.py", StopOnEntry: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Session(res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Control(ctxFor(t, 20*time.Second), dap.CmdStepOver, dap.ControlRequest{SessionID: res.SessionID, ThreadID: 999999})
	if code(err) != protocol.CodeInvalidPayload || !strings.Contains(err.Error(), "next failed") || !strings.Contains(err.Error(), "999999") {
		t.Fatalf("err = %v, want invalid_payload with debugpy's message", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered in %v", d)
	}
}
