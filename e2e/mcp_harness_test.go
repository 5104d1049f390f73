package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
)

// The MCP tests drive tether's MCP server with the official TypeScript SDK
// client (e2e/clients/mcp_client.mjs), over stdio (`tether mcp`) and over
// streamable HTTP (the broker's endpoint), against a real broker and bridge.

// mcpClient is one mcp_client.mjs process: an MCP session.
type mcpClient struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}

	mu       sync.Mutex
	nextID   int
	results  map[int]chan mcpResult
	progress map[int][]mcpProgress
	tools    chan mcpTools
}

// mcpResult is a tools/call outcome: a result (IsError for tool errors) or
// a failed request (Err: a protocol error, an abort, a client timeout).
type mcpResult struct {
	IsError    bool
	Text       string
	Structured json.RawMessage
	Err        string
	Elapsed    time.Duration
}

type mcpProgress struct {
	Progress, Total float64
	Message         string
}

type mcpTools struct {
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	SchemaErrors []map[string]string `json:"schema_errors"`
	Err          string              `json:"-"`
}

func (tl mcpTools) names() []string {
	var out []string
	for _, t := range tl.Tools {
		out = append(out, t.Name)
	}
	return out
}

// startMCPClient runs mcp_client.mjs with args and returns it with its first
// event (connected or connect_error).
func startMCPClient(t *testing.T, args ...string) (*mcpClient, map[string]any) {
	t.Helper()
	cmd, stdin, stdout := startNode(t, mcpClientsDir(t), append([]string{"mcp_client.mjs"}, args...)...)
	c := &mcpClient{t: t, cmd: cmd, stdin: stdin, done: make(chan struct{}),
		results: map[int]chan mcpResult{}, progress: map[int][]mcpProgress{}, tools: make(chan mcpTools, 8)}
	first := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch ev["event"] {
			case "connected", "connect_error":
				first <- ev
			default:
				c.handle(ev, sc.Bytes())
			}
		}
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.close)
	select {
	case ev := <-first:
		return c, ev
	case <-c.done:
		t.Fatal("mcp_client.mjs exited before connecting")
	case <-time.After(20 * time.Second):
		t.Fatal("mcp_client.mjs did not connect within 20s")
	}
	return nil, nil
}

func mcpClientsDir(t *testing.T) string {
	t.Helper()
	dir := clientsDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the MCP TypeScript SDK is not installed in %s (make deps-node runs npm ci)", dir)
	}
	return dir
}

// connectMCP starts a client that must connect.
func connectMCP(t *testing.T, args ...string) *mcpClient {
	t.Helper()
	c, ev := startMCPClient(t, args...)
	if ev["event"] != "connected" {
		t.Fatalf("MCP client did not connect: %v", ev)
	}
	return c
}

func (c *mcpClient) handle(ev map[string]any, raw []byte) {
	id := -1
	if f, ok := ev["id"].(float64); ok {
		id = int(f)
	}
	switch ev["event"] {
	case "tools":
		var tl mcpTools
		_ = json.Unmarshal(raw, &tl)
		c.tools <- tl
	case "progress":
		var p mcpProgress
		p.Progress, _ = ev["progress"].(float64)
		p.Total, _ = ev["total"].(float64)
		p.Message, _ = ev["message"].(string)
		c.mu.Lock()
		c.progress[id] = append(c.progress[id], p)
		c.mu.Unlock()
	case "result", "error":
		var r mcpResult
		ms, _ := ev["elapsed_ms"].(float64)
		r.Elapsed = time.Duration(ms * float64(time.Millisecond))
		if ev["event"] == "error" {
			r.Err, _ = ev["message"].(string)
			if id < 0 {
				c.tools <- mcpTools{Err: r.Err}
				return
			}
		} else {
			var body struct {
				Result struct {
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
					StructuredContent json.RawMessage `json:"structuredContent"`
					IsError           bool            `json:"isError"`
				} `json:"result"`
			}
			_ = json.Unmarshal(raw, &body)
			r.IsError, r.Structured = body.Result.IsError, body.Result.StructuredContent
			for _, ct := range body.Result.Content {
				r.Text += ct.Text
			}
		}
		c.mu.Lock()
		ch := c.results[id]
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

func (c *mcpClient) send(cmd map[string]any) {
	c.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		c.t.Fatalf("writing to mcp_client: %v", err)
	}
}

// list lists the tools.
func (c *mcpClient) list() mcpTools {
	c.t.Helper()
	c.send(map[string]any{"cmd": "list"})
	select {
	case tl := <-c.tools:
		if tl.Err != "" {
			c.t.Fatalf("tools/list: %s", tl.Err)
		}
		return tl
	case <-time.After(20 * time.Second):
		c.t.Fatal("tools/list not answered within 20s")
	}
	return mcpTools{}
}

// start calls a tool without waiting; progress asks for notifications.
func (c *mcpClient) start(name string, args any, progress bool) int {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.results[id] = make(chan mcpResult, 1)
	c.mu.Unlock()
	c.send(map[string]any{"cmd": "call", "id": id, "name": name, "arguments": args, "progress": progress})
	return id
}

// wait waits for call id's outcome.
func (c *mcpClient) wait(id int, within time.Duration) mcpResult {
	c.t.Helper()
	c.mu.Lock()
	ch := c.results[id]
	c.mu.Unlock()
	select {
	case r := <-ch:
		return r
	case <-c.done:
		c.t.Fatalf("mcp_client exited while call %d was pending", id)
	case <-time.After(within):
		c.t.Fatalf("call %d not answered within %s", id, within)
	}
	return mcpResult{}
}

func (c *mcpClient) cancel(id int) { c.send(map[string]any{"cmd": "cancel", "id": id}) }

func (c *mcpClient) progressOf(id int) []mcpProgress {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]mcpProgress(nil), c.progress[id]...)
}

// call calls a tool and waits for its outcome (up to 90 s).
func (c *mcpClient) call(name string, args any) mcpResult {
	c.t.Helper()
	return c.wait(c.start(name, args, false), 90*time.Second)
}

// ok calls a tool that must succeed, decodes its structured result into
// out (when not nil), and returns its text.
func (c *mcpClient) ok(name string, args, out any) string {
	c.t.Helper()
	r := c.call(name, args)
	if r.Err != "" || r.IsError {
		c.t.Fatalf("%s %v: %s%s", name, args, r.Err, r.Text)
	}
	if out != nil {
		if err := json.Unmarshal(r.Structured, out); err != nil {
			c.t.Fatalf("%s: structured content %s: %v", name, r.Structured, err)
		}
	}
	return r.Text
}

// fails calls a tool that must answer isError with the tether code.
func (c *mcpClient) fails(name string, args any, code string) mcpResult {
	c.t.Helper()
	r := c.call(name, args)
	if r.Err != "" || !r.IsError || !strings.Contains(r.Text, code) {
		c.t.Fatalf("%s %v: want isError %s, got err=%q isError=%v %q", name, args, code, r.Err, r.IsError, r.Text)
	}
	return r
}

func (c *mcpClient) close() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// mcpTransports are the two ways in, as client arguments for workspace ws
// on broker b with caller token tok.
func mcpTransports(b *brokerProc, ws, tok string) map[string][]string {
	stdio, _ := json.Marshal([]string{tetherBin, "mcp", "--broker", b.url, "--workspace", ws, "--token", tok, "--log-level", "debug"})
	return map[string][]string{
		"stdio": {"--stdio", string(stdio)},
		"http":  {"--url", b.url + "/api/v1/workspaces/" + ws + "/mcp", "--token", tok},
	}
}

// overMCP runs f as a subtest per transport, each with its own client.
// The client lists the tools first, so the TypeScript SDK checks every
// structured result against its tool's output schema.
func overMCP(t *testing.T, b *brokerProc, ws, tok string, f func(t *testing.T, c *mcpClient)) {
	for _, name := range []string{"stdio", "http"} {
		args := mcpTransports(b, ws, tok)[name]
		t.Run(name, func(t *testing.T) {
			c := connectMCP(t, args...)
			c.list()
			f(t, c)
		})
	}
}

// mcpWorkspace is a broker and a bridge serving a fresh root (a git
// repository), with extra bridge flags.
type mcpWorkspace struct {
	b      *brokerProc
	bridge *proc
	ws     string
	tok    string
	root   string
}

func startMCPWorkspace(t *testing.T, files map[string]string, extra ...string) *mcpWorkspace {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, files)
	b := startBroker(t)
	ws := "mcp-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(ws) > 60 {
		ws = ws[:60]
	}
	args := append([]string{"bridge", "--broker", b.url, "--workspace", ws, "--token", token(t, auth.RoleBridge, ws), "--root", root, "--log-level", "debug"}, extra...)
	p := start(t, "bridge "+ws, exec.Command(tetherBin, args...))
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "%s holding %s", b.name, ws)
	return &mcpWorkspace{b: b, bridge: p, ws: ws, tok: token(t, auth.RoleCaller, ws), root: root}
}

// git runs git in dir.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// within fails the test when d is over max.
func within(t *testing.T, what string, d, max time.Duration) {
	t.Helper()
	if d > max {
		t.Errorf("%s took %s, want under %s", what, d, max)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return string(b)
}
