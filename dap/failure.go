//go:build !windows

package dap

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tetherdev/tether/protocol"
)

// Failures that carry their reason. An adapter that fails a launch often
// says why only on its "debug console" (delve: "Build error: Check the
// debug console for details"), which an agent never sees. So the session
// keeps the last lines the adapter printed there (output events of
// category console, stderr and important: the adapter's own words, and the
// program's stderr where the adapter forwards it, as debugpy does with a
// traceback; never stdout) next to its process's stderr, and a failed launch,
// attach or initialize answers with them and, where tether knows it, the
// next step.

// Bounds of the adapter's words in a failure: the last lines, at most
// this many bytes, so one failure never floods the caller.
const (
	failureLines = 20
	failureBytes = 4 << 10
)

// saidCategories are the output categories that are the adapter speaking
// (debugpy and delve put build and import errors under stderr).
var saidCategories = map[string]bool{"console": true, "stderr": true, "important": true}

// saidLog keeps the last max bytes of the adapter's words, each piece with
// the seq of the last request sent before it arrived (Message.AfterSeq), so
// that a request's failure shows what was printed since it was sent. Safe
// for concurrent use.
type saidLog struct {
	mu     sync.Mutex
	max    int
	size   int
	pieces []saidPiece
}

type saidPiece struct {
	seq  int
	text string
}

func (l *saidLog) write(seq int, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(text) > l.max {
		text = text[len(text)-l.max:]
	}
	l.pieces = append(l.pieces, saidPiece{seq, text})
	l.size += len(text)
	for l.size > l.max {
		l.size -= len(l.pieces[0].text)
		l.pieces = l.pieces[1:]
	}
}

// since is what was printed after request seq was sent (all of it for 0).
func (l *saidLog) since(seq int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, p := range l.pieces {
		if p.seq >= seq {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

// noteSaid keeps an output event's text when it is the adapter speaking;
// seq is the event's Message.AfterSeq.
func (s *Session) noteSaid(seq int, category, text string) {
	if category == "" {
		category = "console" // DAP's default category
	}
	if saidCategories[category] {
		s.said.write(seq, text)
	}
}

// requestFailed is the answer to a request the adapter refused:
// invalid_payload with its message, the next step when tether knows one,
// and what the adapter printed since the request was sent.
func (s *Session) requestFailed(re *ResponseError) error {
	msg := re.Error()
	said := boundTail(s.said.since(re.Seq), failureLines, failureBytes)
	if h := nextStep(s.adapter.Name(), msg+"\n"+said); h != "" {
		msg += "\nnext step: " + h
	}
	if said != "" {
		msg += "\nthe debug adapter printed:\n" + said
	}
	return protocol.Errorf(protocol.CodeInvalidPayload, "%s", msg)
}

// adapterSaid is the end of what the adapter printed (its console and
// stderr output events, then its process's stderr), bounded, or "".
func (s *Session) adapterSaid() string {
	var parts []string
	said := s.said.since(0)
	if t := strings.TrimSpace(said); t != "" {
		parts = append(parts, t)
	}
	if s.proc != nil {
		var keep []string
		for l := range strings.Lines(s.proc.stderr.String()) {
			// A listening adapter's address line says nothing of a failure.
			if l = strings.TrimRight(l, "\n"); strings.TrimSpace(l) != "" && !listenLine.MatchString(l) {
				keep = append(keep, l)
			}
		}
		if t := strings.Join(keep, "\n"); t != "" && !strings.Contains(said, t) {
			parts = append(parts, t)
		}
	}
	return boundTail(strings.Join(parts, "\n"), failureLines, failureBytes)
}

// failureLineBytes caps each line of the adapter's words: a long line is a
// command line or a dump (debugpy prints the gdb command of an attach, with
// an access token in it), not a reason.
const failureLineBytes = 400

// boundTail is the last n lines of text, each cut to failureLineBytes, cut
// further to its last max bytes (at a rune boundary).
func boundTail(text string, n, max int) string {
	lines := strings.Split(lastLines(strings.TrimRight(strings.TrimLeft(text, "\r\n"), " \t\r\n"), n), "\n") // keeps the first line's indent
	for i, l := range lines {
		if len(l) > failureLineBytes {
			cut := failureLineBytes
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			lines[i] = l[:cut] + "…"
		}
	}
	text = strings.Join(lines, "\n")
	if len(text) > max {
		cut := len(text) - max
		for cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut++
		}
		text = "…" + text[cut:]
	}
	return text
}

// withReason is msg followed by the next step tether can name for it and
// what the adapter printed.
func (s *Session) withReason(msg string) string {
	said := s.adapterSaid()
	// The next step comes first: a caller that cuts long messages (the MCP
	// tools cut at 2000 bytes) keeps it.
	if h := nextStep(s.adapter.Name(), msg+"\n"+said); h != "" {
		msg += "\nnext step: " + h
	}
	if said != "" && !strings.Contains(msg, said) {
		msg += "\nthe debug adapter printed:\n" + said
	}
	return msg
}

var (
	noModule  = regexp.MustCompile(`No module named '?([A-Za-z0-9_.]+)'?`)
	goCompile = regexp.MustCompile(`(?m)^\S+\.go:\d+(:\d+)?: `)
)

// nextStep names what to do about a failure whose text (the adapter's
// message and its printed lines) shows a common cause; "" when none does.
func nextStep(adapter, text string) string {
	switch {
	case strings.Contains(text, "go.mod file not found"):
		return "the Go program's directory has no go.mod in it or above it: run `go mod init NAME` there, or give one .go file as program"
	case adapter == "delve" && goCompile.MatchString(text):
		return "the Go program does not compile: fix the errors the adapter printed (file:line: message) and start again"
	case noModule.MatchString(text):
		mod := noModule.FindStringSubmatch(text)[1]
		return fmt.Sprintf("python cannot import %s: install it for the python3 that runs the program (python3 -m pip install %s), or set cwd or env PYTHONPATH so it is found", mod, strings.SplitN(mod, ".", 2)[0])
	case strings.Contains(text, "Code injection into PID"):
		return "debugpy attaches to a pid by injecting code with gdb: the pid must be a running python process, gdb must be on PATH and ptrace allowed (kernel.yama.ptrace_scope 0, or the same user with CAP_SYS_PTRACE); or start the program with python3 -m debugpy --listen PORT and attach with connect"
	case adapter == "lldb-dap" && (strings.Contains(text, "does not exist") || strings.Contains(text, "No such file")):
		return "build the program first with debug information (gcc -g -O0 -o PROGRAM SOURCE.c) and give its path"
	}
	return ""
}

// logLine is what the bridge's log keeps of a failed start: the first line
// of its message (the adapter's answer and the next step stay, what the
// adapter printed does not: it can hold the program's output).
func logLine(err error) string {
	first, _, _ := strings.Cut(err.Error(), "\n")
	return first
}
