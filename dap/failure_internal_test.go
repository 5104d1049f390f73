//go:build !windows

package dap

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNextStepNamesCommonCauses(t *testing.T) {
	for _, c := range []struct{ adapter, text, want string }{
		{"delve", "go: go.mod file not found in current directory or any parent directory", "go mod init"},
		{"delve", "# example.com/x\n./main.go:5:1: syntax error: unexpected }", "does not compile"},
		{"debugpy", "ModuleNotFoundError: No module named 'requests.adapters'", "python3 -m pip install requests)"},
		{"lldb-dap", "launch failed: executable file does not exist", "gcc -g"},
		{"debugpy", "RuntimeError: Code injection into PID=999999 failed:", "ptrace"},
		{"node", "TypeError: x is undefined", ""},
	} {
		if got := nextStep(c.adapter, c.text); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("nextStep(%s, %q) = %q, want it to contain %q", c.adapter, c.text, got, c.want)
		}
	}
}

// FuzzBoundTail: whatever an adapter prints, a failure's share of it is
// at most failureLines lines and failureBytes bytes (plus the cut mark),
// and valid UTF-8 stays valid.
func FuzzBoundTail(f *testing.F) {
	f.Add(strings.Repeat("é line\n", 100))
	f.Add("\xff\xfe")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		out := boundTail(s, failureLines, failureBytes)
		if len(out) > failureBytes+len("…") {
			t.Fatalf("%d bytes", len(out))
		}
		if strings.Count(out, "\n") >= failureLines {
			t.Fatalf("%d lines", strings.Count(out, "\n")+1)
		}
		for l := range strings.Lines(out) {
			if len(strings.TrimSuffix(l, "\n")) > failureLineBytes+len("…")*2 {
				t.Fatalf("a line of %d bytes", len(l))
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from valid input: %q", out)
		}
	})
}

// A request's failure shows only what the adapter printed after the
// request was sent, and the log keeps its bound.
func TestSaidLogSinceAndBound(t *testing.T) {
	l := &saidLog{max: 16}
	l.write(1, "before\n")
	l.write(2, "during\n")
	l.write(3, "after\n")
	if got := l.since(2); got != "during\nafter\n" {
		t.Errorf("since(2) = %q", got)
	}
	l.write(4, "0123456789abcdef")
	if got := l.since(0); got != "0123456789abcdef" {
		t.Errorf("since(0) = %q, want the last 16 bytes", got)
	}
}

func TestDemangleType(t *testing.T) {
	for in, want := range map[string]string{
		"St13runtime_error": "std::runtime_error", "N2ns5ErrorE": "ns::Error", "7MyError": "MyError",
		"NSt8ios_base7failureE": "std::ios_base::failure", "i": "i", "": "", "St": "St", "N3abcE": "abc", "99x": "99x", "3abc4defg": "3abc4defg",
	} {
		if got := demangleType(in); got != want {
			t.Errorf("demangleType(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzDemangleType(f *testing.F) {
	f.Add("St13runtime_error")
	f.Add("N2ns5ErrorE")
	f.Fuzz(func(t *testing.T, s string) {
		_ = demangleType(s) // never panics, whatever lldb shows
		_ = quoted(EvalResult{Result: s})
	})
}
