//go:build !windows

package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/dap/node"
)

// The CDP mapping tested against transcripts recorded from a real node 20:
// each scenario is a DAP conversation with the adapter, asserted the same
// way when recording (a launch of real node, its CDP traffic written to
// testdata/cdp) and when replaying (an attach to a fake inspector that
// answers from the transcript, named so: replayInspector). Record anew
// with `go test ./dap/node -run TestCDP -record` after changing what the
// adapter sends.

var record = flag.Bool("record", false, "run the scenarios against real node and rewrite testdata/cdp")

// rootToken stands for the scenario's directory in a transcript.
const rootToken = "/TETHER_ROOT"

// dapPeer drives the adapter over DAP.
type dapPeer struct {
	t      *testing.T
	c      *dap.Client
	events chan *dap.Message
}

func serveAdapter(t *testing.T, opts node.Options) *dapPeer {
	t.Helper()
	ours, theirs := net.Pipe()
	done := make(chan struct{})
	go func() { node.Serve(theirs, opts); close(done) }()
	p := &dapPeer{t: t, events: make(chan *dap.Message, 256)}
	p.c = dap.NewClient(ours, ours, func(m *dap.Message) { p.events <- m })
	t.Cleanup(func() {
		_ = ours.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10s of its connection closing")
		}
	})
	return p
}

func (p *dapPeer) do(command string, args, body any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.c.Do(ctx, command, args, body); err != nil {
		p.t.Fatalf("%s: %v", command, err)
	}
}

// await returns the next event named name, skipping others.
func (p *dapPeer) await(name string) *dap.Message {
	p.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-p.events:
			if m.Event == name {
				return m
			}
		case <-deadline:
			p.t.Fatalf("no %s event within 15s", name)
			return nil
		}
	}
}

type stopped struct {
	Reason           string `json:"reason"`
	Text             string `json:"text"`
	HitBreakpointIDs []int  `json:"hitBreakpointIds"`
}

func (p *dapPeer) awaitStop() stopped {
	p.t.Helper()
	var s stopped
	_ = json.Unmarshal(p.await("stopped").Body, &s)
	return s
}

type frame struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Line   int    `json:"line"`
	Source *struct {
		Path string `json:"path"`
	} `json:"source"`
}

func (p *dapPeer) top() frame {
	p.t.Helper()
	var body struct {
		StackFrames []frame `json:"stackFrames"`
	}
	p.do("stackTrace", map[string]any{"threadId": 1, "levels": 5}, &body)
	if len(body.StackFrames) == 0 {
		p.t.Fatal("no stack frames")
	}
	return body.StackFrames[0]
}

// locals returns the variables of the frame's first scope, by name.
func (p *dapPeer) locals(frameID int) map[string]string {
	p.t.Helper()
	var scopes struct {
		Scopes []struct {
			Name string `json:"name"`
			Ref  int    `json:"variablesReference"`
		} `json:"scopes"`
	}
	p.do("scopes", map[string]any{"frameId": frameID}, &scopes)
	out := map[string]string{}
	for _, sc := range scopes.Scopes {
		if sc.Name == "Global" {
			continue
		}
		var vars struct {
			Variables []struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"variables"`
		}
		p.do("variables", map[string]any{"variablesReference": sc.Ref}, &vars)
		for _, v := range vars.Variables {
			if _, dup := out[v.Name]; !dup {
				out[v.Name] = v.Value
			}
		}
	}
	return out
}

// start brings the adapter to the program's first line: a launch of real
// node when recording, an attach to the replayed inspector otherwise.
func start(t *testing.T, name, program string, files ...string) (*dapPeer, string) {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata/programs", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, _ = filepath.EvalSymlinks(root)
	file := filepath.Join("testdata/cdp", name+".jsonl")
	if *record {
		nodePath, err := exec.LookPath("node")
		if err != nil {
			t.Skip("node is not installed")
		}
		var buf lockedBuffer
		t.Cleanup(func() {
			out := bytes.ReplaceAll(buf.Bytes(), []byte(root), []byte(rootToken))
			if err := os.WriteFile(file, out, 0o644); err != nil {
				t.Error(err)
			}
		})
		p := serveAdapter(t, node.Options{Node: nodePath, Dir: root, Environ: os.Environ(), Record: &buf})
		p.do("initialize", map[string]any{"adapterID": "node", "linesStartAt1": true, "columnsStartAt1": true}, nil)
		p.do("launch", map[string]any{"program": filepath.Join(root, program)}, nil)
		p.await("initialized")
		return p, root
	}
	transcript, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (record it with -record)", err)
	}
	addr := replayInspector(t, bytes.ReplaceAll(transcript, []byte(rootToken), []byte(root)))
	host, port, _ := net.SplitHostPort(addr)
	p := serveAdapter(t, node.Options{Dir: root})
	p.do("initialize", map[string]any{"adapterID": "node", "linesStartAt1": true, "columnsStartAt1": true}, nil)
	p.do("attach", map[string]any{"address": host, "port": port}, nil)
	p.await("initialized")
	return p, root
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

type entry struct {
	Dir string          `json:"dir"`
	Msg json.RawMessage `json:"msg"`
}

type cdpMsg struct {
	ID     int64           `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// replayInspector is a fake V8 inspector that answers from a recorded
// transcript: each request the adapter sends is matched to the first
// recorded request of the same method not yet matched, its recorded
// response is sent back under the adapter's id, and recorded events are
// sent in their recorded places. Requests past the transcript's end (the
// detach of an attach) are answered with an empty result.
func replayInspector(t *testing.T, transcript []byte) string {
	t.Helper()
	var entries []entry
	sc := bufio.NewScanner(bytes.NewReader(transcript))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		entries = append(entries, e)
	}
	var srv *httptest.Server
	mux := http.NewServeMux()
	mux.HandleFunc("/json/list", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `[{"type":"node","title":"replay","webSocketDebuggerUrl":"ws://%s/replay"}]`, srv.Listener.Addr())
	})
	done := make(chan struct{})
	mux.HandleFunc("/replay", func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		ws.SetReadLimit(64 << 20)
		defer ws.CloseNow()
		replay(t, ws, entries)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.Listener.Addr().String()
}

func replay(t *testing.T, ws *websocket.Conn, entries []entry) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := map[int64]int64{} // recorded id -> the adapter's
	matched := map[int]bool{}
	write := func(m cdpMsg) bool {
		b, _ := json.Marshal(m)
		return ws.Write(ctx, websocket.MessageText, b) == nil
	}
	// receive reads one request and matches it to a recorded one.
	receive := func(from int) bool {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return false
		}
		var got cdpMsg
		_ = json.Unmarshal(data, &got)
		for i := from; i < len(entries); i++ {
			if entries[i].Dir != "send" || matched[i] {
				continue
			}
			var want cdpMsg
			_ = json.Unmarshal(entries[i].Msg, &want)
			if want.Method == got.Method {
				matched[i], ids[want.ID] = true, got.ID
				return true
			}
		}
		// Not in the transcript (after its end: a detach).
		return write(cdpMsg{ID: got.ID, Result: json.RawMessage(`{}`)})
	}
	for i, e := range entries {
		var m cdpMsg
		_ = json.Unmarshal(e.Msg, &m)
		switch {
		case e.Dir == "send":
			for !matched[i] {
				if !receive(i) {
					return
				}
			}
		case m.ID != 0:
			for {
				if _, ok := ids[m.ID]; ok {
					break
				}
				if !receive(i) {
					return
				}
			}
			m.ID = ids[m.ID]
			if !write(m) {
				return
			}
		default:
			if !write(m) {
				return
			}
		}
	}
	for receive(len(entries)) {
	}
}

// TestCDPCommonJSBreakpointsStackScopesSteps: a conditional breakpoint,
// a hit-count breakpoint and a logpoint in a CommonJS program; the stack,
// scopes with a closure variable, variables, evaluate and a step.
func TestCDPCommonJSBreakpointsStackScopesSteps(t *testing.T) {
	p, root := start(t, "commonjs", "calc.js", "calc.js")
	calc := filepath.Join(root, "calc.js")
	var bps struct {
		Breakpoints []struct {
			ID       int  `json:"id"`
			Verified bool `json:"verified"`
			Line     int  `json:"line"`
		} `json:"breakpoints"`
	}
	p.do("setBreakpoints", map[string]any{"source": map[string]any{"path": calc}, "breakpoints": []map[string]any{
		{"line": 6, "condition": "p === 2"},
		{"line": 9, "hitCondition": "3"},
		{"line": 14, "logMessage": "logpoint i={i} total={total}"},
	}}, &bps)
	if len(bps.Breakpoints) != 3 || !bps.Breakpoints[0].Verified || bps.Breakpoints[1].Line != 9 {
		t.Fatalf("breakpoints = %+v, want three, verified", bps.Breakpoints)
	}
	p.do("setExceptionBreakpoints", map[string]any{"filters": []string{}}, nil)
	p.do("configurationDone", nil, nil)

	st := p.awaitStop()
	if st.Reason != "breakpoint" || len(st.HitBreakpointIDs) != 1 || st.HitBreakpointIDs[0] != bps.Breakpoints[0].ID {
		t.Fatalf("first stop %+v, want the conditional breakpoint", st)
	}
	f := p.top()
	if f.Name != "mul" || f.Line != 6 || f.Source == nil || f.Source.Path != calc {
		t.Fatalf("top frame %+v, want mul at calc.js:6", f)
	}
	vars := p.locals(f.ID)
	for k, v := range map[string]string{"p": "2", "q": "2", "r": "14", "parts": "Array(2)", "k": "10"} {
		if vars[k] != v {
			t.Errorf("%s = %q, want %s (all: %v)", k, vars[k], v, vars)
		}
	}
	var ev struct {
		Result string `json:"result"`
		Type   string `json:"type"`
	}
	p.do("evaluate", map[string]any{"expression": "p * q + k", "frameId": f.ID, "context": "watch"}, &ev)
	if ev.Result != "14" || ev.Type != "number" {
		t.Errorf("evaluate = %+v, want 14", ev)
	}
	p.do("continue", map[string]any{"threadId": 1}, nil)
	st = p.awaitStop()
	f = p.top()
	if st.Reason != "breakpoint" || f.Name != "add" || f.Line != 9 {
		t.Fatalf("second stop %+v at %+v, want the third add call", st, f)
	}
	if vars := p.locals(f.ID); vars["a"] != "22" || vars["b"] != "14" {
		t.Errorf("add's locals %v, want a 22, b 14", vars)
	}
	p.do("stepOut", map[string]any{"threadId": 1}, nil)
	if st := p.awaitStop(); st.Reason != "step" {
		t.Fatalf("after stepOut: %+v, want a step stop", st)
	}
	if f := p.top(); f.Line != 14 {
		t.Errorf("after stepOut at %+v, want line 14 (add was the last call of line 13)", f)
	}
	p.do("disconnect", map[string]any{"terminateDebuggee": true}, nil)
}

// TestCDPTypeScriptSourceMap: a breakpoint on a .ts line binds in the
// compiled .js, and the frame reports the .ts path and line.
func TestCDPTypeScriptSourceMap(t *testing.T) {
	p, root := start(t, "typescript", "app.js", "app.ts", "app.js", "app.js.map")
	ts := filepath.Join(root, "app.ts")
	var bps struct {
		Breakpoints []struct {
			Verified bool `json:"verified"`
			Line     int  `json:"line"`
		} `json:"breakpoints"`
	}
	p.do("setBreakpoints", map[string]any{"source": map[string]any{"path": ts}, "breakpoints": []map[string]any{{"line": 9}}}, &bps)
	if len(bps.Breakpoints) != 1 || bps.Breakpoints[0].Line != 9 {
		t.Fatalf("breakpoints = %+v, want one at app.ts:9", bps.Breakpoints)
	}
	if !bps.Breakpoints[0].Verified {
		// An attach (the replay) may set it before the script is parsed:
		// it binds when the script is.
		var ev struct {
			Breakpoint struct {
				Verified bool `json:"verified"`
				Line     int  `json:"line"`
			} `json:"breakpoint"`
		}
		_ = json.Unmarshal(p.await("breakpoint").Body, &ev)
		if !ev.Breakpoint.Verified || ev.Breakpoint.Line != 9 {
			t.Fatalf("breakpoint event %+v, want app.ts:9 bound", ev)
		}
	}
	p.do("configurationDone", nil, nil)
	if st := p.awaitStop(); st.Reason != "breakpoint" {
		t.Fatalf("stop %+v, want the breakpoint", st)
	}
	f := p.top()
	if f.Name != "describe" || f.Line != 9 || f.Source == nil || f.Source.Path != ts {
		t.Fatalf("top frame %+v, want describe at app.ts:9", f)
	}
	if vars := p.locals(f.ID); vars["label"] != `"(10, 20)"` || vars["scale"] != "10" {
		t.Errorf("locals %v, want label (10, 20) and scale 10", vars)
	}
	p.do("disconnect", map[string]any{"terminateDebuggee": true}, nil)
}

// TestCDPUncaughtException: exception filter uncaught stops at the throw
// with reason exception and the error's first line.
func TestCDPUncaughtException(t *testing.T) {
	p, _ := start(t, "exception", "throw.js", "throw.js")
	p.do("setExceptionBreakpoints", map[string]any{"filters": []string{"uncaught"}}, nil)
	p.do("configurationDone", nil, nil)
	st := p.awaitStop()
	if st.Reason != "exception" || !strings.Contains(st.Text, "RangeError: n too large: 3") {
		t.Fatalf("stop %+v, want exception RangeError", st)
	}
	f := p.top()
	if f.Name != "check" || f.Line != 4 {
		t.Fatalf("top frame %+v, want check:4", f)
	}
	if vars := p.locals(f.ID); vars["n"] != "3" || !strings.HasPrefix(vars["err"], "RangeError") {
		t.Errorf("locals %v, want n 3 and err", vars)
	}
	p.do("disconnect", map[string]any{"terminateDebuggee": true}, nil)
}
