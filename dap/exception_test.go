//go:build !windows

package dap_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// stopOf starts req in root and waits for its first stop, which must be
// an exception stop carrying its details.
func stopOf(t *testing.T, m *dap.Manager, req dap.StartRequest) *dap.StopInfo {
	t.Helper()
	s := sessionOf(t, m, req)
	start := time.Now()
	snap, err := s.Snapshot(ctxFor(t, 40*time.Second), dap.SnapshotRequest{SessionID: s.ID(), WaitTimeoutMS: 30000})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.Stop == nil || snap.Stop.Exception == nil {
		t.Fatalf("stop = %+v, want one with its exception", snap.Stop)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the exception's stop took %v", d)
	}
	// The details stay with the session's stop: list-sessions has them.
	if info := s.Info(); info.Stop == nil || info.Stop.Exception == nil {
		t.Errorf("list-sessions' stop lacks the exception: %+v", info.Stop)
	}
	t.Logf("stop %+v exception %+v", snap.Stop, snap.Stop.Exception)
	return snap.Stop
}

func TestPythonExceptionStopCarriesTypeAndMessage(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "div.py"), "def ratio(a, b):\n    return a / b\n\nprint(ratio(1, 0))\n")
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	st := stopOf(t, m, dap.StartRequest{Language: "python", Program: "div.py"})
	ex := st.Exception
	if ex.Type != "ZeroDivisionError" || ex.Message != "division by zero" {
		t.Errorf("exception = %q %q, want ZeroDivisionError: division by zero", ex.Type, ex.Message)
	}
	if !strings.Contains(ex.Stack, "div.py") || !strings.Contains(ex.Stack, "ratio") {
		t.Errorf("the stack does not show the throw:\n%s", ex.Stack)
	}
}

func TestPythonRaisedFilterStopsOnCaughtException(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "caught.py"), "try:\n    {}['missing']\nexcept KeyError:\n    pass\n")
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	st := stopOf(t, m, dap.StartRequest{Language: "python", Program: "caught.py", ExceptionFilters: []string{"raised"}})
	if st.Exception.Type != "KeyError" {
		t.Errorf("exception = %+v, want the KeyError", st.Exception)
	}
}

func TestUnknownExceptionFilterIsInvalidPayloadNamingIt(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "ok.py"), "print(1)\n")
	m := newManager(t, root)
	needAdapter(t, m, "debugpy")
	_, err := m.Start(ctxFor(t, 60*time.Second), dap.StartRequest{Language: "python", Program: "ok.py", ExceptionFilters: []string{"uncaught", "everything"}})
	if code(err) != protocol.CodeInvalidPayload || !strings.Contains(err.Error(), "exception_filters[1]") ||
		!strings.Contains(err.Error(), `"everything"`) || !strings.Contains(err.Error(), `"raised"`) {
		t.Fatalf("err = %v, want invalid_payload naming exception_filters[1] and listing raised", err)
	}
}

func TestCSegfaultStopCarriesSignal(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "segv.c"), "#include <stddef.h>\nint main(void) {\n  int *p = NULL;\n  *p = 42;\n  return 0;\n}\n")
	gcc(t, root, "gcc", "segv", "segv.c")
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	st := stopOf(t, m, dap.StartRequest{Language: "c", Program: "segv"})
	if st.Exception.Type != "SIGSEGV" || !strings.Contains(st.Exception.Message, "SIGSEGV") {
		t.Errorf("exception = %+v, want SIGSEGV", st.Exception)
	}
}

func TestCppThrowFilterStopsOnThrow(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "thrower.cpp"), "#include <stdexcept>\nint main() {\n  try { throw std::runtime_error(\"bad thing\"); } catch (...) {}\n  return 0;\n}\n")
	gcc(t, root, "g++", "thrower", "thrower.cpp")
	m := newManager(t, root)
	needAdapter(t, m, "lldb-dap")
	st := stopOf(t, m, dap.StartRequest{Language: "cpp", Program: "thrower", ExceptionFilters: []string{"cpp_throw"}})
	if st.Exception.Type != "std::runtime_error" || st.Exception.Message != "bad thing" {
		t.Errorf("exception = %+v, want std::runtime_error: bad thing", st.Exception)
	}
}

func TestGoPanicStopCarriesPanicMessage(t *testing.T) {
	root := goModuleWorkspace(t, goPanics)
	m := newManager(t, root)
	needAdapter(t, m, "delve")
	st := stopOf(t, m, dap.StartRequest{Language: "go", Program: "goapp"})
	ex := st.Exception
	if ex.Type != "panic" || !strings.Contains(ex.Message, "assignment to entry in nil map") {
		t.Errorf("exception = %+v, want the panic's message", ex)
	}
	if !strings.Contains(ex.Stack, "main.main") {
		t.Errorf("the stack does not show main.main:\n%s", ex.Stack)
	}
}

func TestJavaScriptUncaughtStopCarriesError(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "boom.js"), "function parse(s) {\n  return JSON.parse(s).value.length;\n}\nparse('{}');\n")
	m := newManager(t, root)
	needAdapter(t, m, "node")
	st := stopOf(t, m, dap.StartRequest{Language: "javascript", Program: "boom.js", ExceptionFilters: []string{"uncaught"}})
	ex := st.Exception
	if ex.Type != "TypeError" || !strings.Contains(ex.Message, "length") || ex.BreakMode != "unhandled" {
		t.Errorf("exception = %+v, want an unhandled TypeError about length", ex)
	}
	if !strings.Contains(ex.Stack, "boom.js:2") {
		t.Errorf("the stack does not show boom.js:2:\n%s", ex.Stack)
	}
}

func TestDebugContextListsExceptionFilters(t *testing.T) {
	m := newManager(t, t.TempDir())
	needAdapter(t, m, "debugpy")
	dc := m.DebugContext(ctxFor(t, 60*time.Second), dap.ContextRequest{})
	for _, a := range dc.DebugAdapters {
		if a.Name != "debugpy" {
			continue
		}
		var names []string
		for _, f := range a.ExceptionFilters {
			names = append(names, f.Filter)
		}
		if !strings.Contains(strings.Join(names, " "), "raised") || !strings.Contains(strings.Join(names, " "), "uncaught") {
			t.Errorf("debugpy's filters = %v, want raised and uncaught", names)
		}
		return
	}
	t.Fatal("debugpy is not listed")
}

func gcc(t *testing.T, dir, cc, out, src string) {
	t.Helper()
	cmd := exec.Command(cc, "-g", "-O0", "-o", out, src)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, b)
	}
}
