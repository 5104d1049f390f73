//go:build !windows

package dap_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/tetherdev/tether/dap"
)

// js-debug's child sessions, tested against testdata/jsdebug_transcript.json
// (written after js-debug's protocol; js-debug cannot be installed here).
// The test binary itself plays js-debug: found on PATH as
// js-debug-adapter, it runs jsDebugFake, which serves the transcript.

// fakeJSDebugEnv, when set in the environment, makes the test binary run
// jsDebugFake with this transcript instead of the tests.
const fakeJSDebugEnv = "TETHER_FAKE_JS_DEBUG"

type transcriptStep struct {
	Expect    string          `json:"expect"`
	Arguments json.RawMessage `json:"arguments"`
	Response  bool            `json:"response"` // expect a response to a reverse request
	Send      map[string]any  `json:"send"`
}

// jsDebugFake is a fake js-debug (dapDebugServer): it listens on the port
// given as its first argument, prints js-debug's listening line, and plays
// connection i of the transcript on the i-th connection, failing (exit 1)
// when the client sends something the transcript does not expect.
func jsDebugFake(transcript, port string) int {
	var doc struct {
		Connections [][]transcriptStep `json:"connections"`
	}
	data, err := os.ReadFile(transcript)
	if err == nil {
		err = json.Unmarshal(data, &doc)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake js-debug:", err)
		return 1
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake js-debug:", err)
		return 1
	}
	fmt.Printf("Debug server listening at %s\n", l.Addr())
	time.AfterFunc(60*time.Second, func() { os.Exit(2) })
	for i := 0; ; i++ {
		conn, err := l.Accept()
		if err != nil {
			return 1
		}
		var script []transcriptStep
		if i < len(doc.Connections) {
			script = doc.Connections[i]
		}
		go playConnection(conn, i, script)
	}
}

func playConnection(conn net.Conn, n int, script []transcriptStep) {
	r := bufio.NewReader(conn)
	seq := 0
	lastSeq := map[string]int{}
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "fake js-debug, connection %d: %s\n", n, fmt.Sprintf(format, args...))
		os.Exit(1)
	}
	read := func() map[string]any {
		raw, err := godap.ReadBaseMessage(r)
		if err != nil {
			return nil
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return m
	}
	write := func(m map[string]any) {
		seq++
		m["seq"] = seq
		if m["type"] == "response" {
			m["request_seq"] = lastSeq[m["command"].(string)]
		}
		b, _ := json.Marshal(m)
		_ = godap.WriteBaseMessage(conn, b)
	}
	for _, st := range script {
		if st.Send != nil {
			write(st.Send)
			continue
		}
		m := read()
		if m == nil {
			fail("closed while expecting %s", st.Expect)
		}
		kind := "request"
		if st.Response {
			kind = "response"
		}
		if m["type"] != kind || m["command"] != st.Expect {
			fail("got %v %v, want %s %s", m["type"], m["command"], kind, st.Expect)
		}
		if len(st.Arguments) > 0 {
			var want any
			_ = json.Unmarshal(st.Arguments, &want)
			if !contains(m["arguments"], want) {
				fail("%s arguments %v, want them to contain %s", st.Expect, m["arguments"], st.Arguments)
			}
		}
		if seqNo, ok := m["seq"].(float64); ok {
			lastSeq[st.Expect] = int(seqNo)
		}
	}
	// Past the transcript (disconnect, at stop-session): succeed.
	for m := read(); m != nil; m = read() {
		if m["type"] == "request" {
			cmd, _ := m["command"].(string)
			lastSeq[cmd] = int(m["seq"].(float64))
			write(map[string]any{"type": "response", "command": cmd, "success": true})
			if cmd == "disconnect" {
				os.Exit(0) // js-debug ends with its last session
			}
		}
	}
}

// contains reports whether got has every part of want ("*" matches any
// value that is present).
func contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !contains(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) {
			return false
		}
		for i := range w {
			if !contains(g[i], w[i]) {
				return false
			}
		}
		return true
	case string:
		return (w == "*" && got != nil) || got == w
	}
	return got == want
}

// TestJSDebugChildSessionRouting: with js-debug on PATH, a Node launch goes
// to it, the child session it asks for with startDebugging is opened on a
// second connection with the breakpoints sent again, and the snapshot's
// stack and variables come from the child.
func TestJSDebugChildSessionRouting(t *testing.T) {
	root := nodeWorkspace(t, "calc.js")
	bin := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "js-debug-adapter")); err != nil {
		t.Fatal(err)
	}
	transcript, _ := filepath.Abs("testdata/jsdebug_transcript.json")
	m, err := dap.NewManager(dap.Config{Root: root, Path: bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		Environ: append(os.Environ(), fakeJSDebugEnv+"="+transcript)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ctx := ctxFor(t, 30*time.Second)
	dc := m.DebugContext(ctx, dap.ContextRequest{})
	found := false
	for _, a := range dc.DebugAdapters {
		found = found || (a.Name == "node" && a.Implementation == "js-debug" && a.Path == filepath.Join(bin, "js-debug-adapter"))
	}
	if !found {
		t.Fatalf("debug_adapters = %+v, want node served by js-debug", dc.DebugAdapters)
	}
	start, err := m.Start(ctx, dap.StartRequest{Language: "javascript", Program: "calc.js",
		Breakpoints: []dap.FileBreakpoints{{Path: "calc.js", Breakpoints: []dap.SourceBreakpoint{{Line: 6}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if start.Adapter != "node" || len(start.Breakpoints) != 1 {
		t.Fatalf("start = %+v", start)
	}
	s, _ := m.Session(start.SessionID)
	snap, err := s.Snapshot(ctx, dap.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Stop == nil || snap.Stop.ThreadID != 7 || len(snap.Frames) != 2 || snap.Frames[0].Name != "mul" || snap.Frames[0].Line != 6 {
		t.Fatalf("snapshot stop %+v frames %+v, want the child's stop in mul:6", snap.Stop, snap.Frames)
	}
	if local(t, snap.Locals, "r") != "10" || len(snap.Scopes) != 3 || local(t, snap.Scopes[1].Variables, "k") != "10" {
		t.Fatalf("locals %+v scopes %+v, want the child's variables", snap.Locals, snap.Scopes)
	}
	if info := s.Info(); info.State != dap.StateStopped {
		t.Fatalf("session %+v, want stopped", info)
	}
	if _, err := m.Stop(ctx, dap.StopRequest{SessionID: start.SessionID}); err != nil {
		t.Fatal(err)
	}
	if out := s.Output(0).Output; strings.Contains(out, "child session did not start") {
		t.Fatalf("output %q", out)
	}
}

// runFakeJSDebug runs jsDebugFake when the test binary was started as
// js-debug (see TestMain).
func runFakeJSDebug() {
	if tr := os.Getenv(fakeJSDebugEnv); tr != "" && len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		os.Exit(jsDebugFake(tr, os.Args[1]))
	}
}
