//go:build !windows

// These tests serve a workspace with a bridge in process, which does not
// build on Windows (docs/platforms.md).

package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/mcp"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

func TestMain(m *testing.M) {
	// A bridge's terminal re-executes the test binary as its reaper.
	terminal.ReaperMain()
	goleak.VerifyTestMain(m)
}

// inprocBridge is a real bridge serving a temporary directory, called in
// process (bridge.Dispatch): the tools' tether calls reach real routes,
// only without a broker between.
type inprocBridge struct {
	br   *bridge.Bridge
	root string

	mu    sync.Mutex
	calls []string // endpoints called, in order
}

func newInprocBridge(t *testing.T, files map[string]string) *inprocBridge {
	t.Helper()
	return newInprocBridgeWith(t, files, bridge.Config{})
}

// newInprocBridgeWith is newInprocBridge with cfg's policy and sandbox
// settings (its Root and Logger are set here).
func newInprocBridgeWith(t *testing.T, files map[string]string, cfg bridge.Config) *inprocBridge {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Root, cfg.Logger = root, zerolog.Nop()
	br, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = br.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &inprocBridge{br: br, root: br.Root()}
}

func (b *inprocBridge) Call(ctx context.Context, req caller.Request) protocol.ToolResponse {
	b.mu.Lock()
	b.calls = append(b.calls, req.Endpoint)
	b.mu.Unlock()
	return b.br.Dispatch(ctx, protocol.ToolCall{CorrelationID: "c", Endpoint: req.Endpoint, Payload: req.Payload, Timeout: req.Timeout.Seconds()})
}

func (b *inprocBridge) reset() {
	b.mu.Lock()
	b.calls = nil
	b.mu.Unlock()
}

func (b *inprocBridge) endpoints() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

// fakeWorkspace stands in for a workspace in states a real one cannot be
// put into on demand here (offline, disconnecting mid-call, answering odd
// results): answer decides each call's response.
type fakeWorkspace struct {
	answer func(ctx context.Context, req caller.Request) protocol.ToolResponse

	mu    sync.Mutex
	calls []caller.Request
}

func (f *fakeWorkspace) Call(ctx context.Context, req caller.Request) protocol.ToolResponse {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.mu.Unlock()
	return f.answer(ctx, req)
}

func (f *fakeWorkspace) reset() {
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
}

func (f *fakeWorkspace) called() []caller.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]caller.Request(nil), f.calls...)
}

// client connects an MCP SDK client to a fresh Server on c over the SDK's
// in-memory transport.
func client(t testing.TB, c mcp.Caller, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	s, err := mcp.New(mcp.Options{Caller: c, Workspace: "ws-test", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.SDK().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
		_ = ss.Close()
		outputSchemas.Delete(cs)
	})
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Resolved{}
	for _, tool := range list.Tools {
		raw, _ := json.Marshal(tool.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: output schema %s: %v", tool.Name, raw, err)
		}
		if schemas[tool.Name], err = s.Resolve(nil); err != nil {
			t.Fatalf("%s: output schema does not resolve: %v", tool.Name, err)
		}
	}
	outputSchemas.Store(cs, schemas)
	if r, ok := c.(interface{ reset() }); ok {
		r.reset() // the tests count the calls their tool calls make
	}
	return cs
}

// outputSchemas holds each test session's listed output schemas, by tool:
// ok checks every structured result against its tool's.
var outputSchemas sync.Map // *sdk.ClientSession -> map[string]*jsonschema.Resolved

// callTool calls a tool with args and returns the result and its text.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args any) (*sdk.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res, text(res)
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// ok calls a tool that must succeed, decodes its structured result into out
// (when not nil) and returns its text.
func ok(t *testing.T, cs *sdk.ClientSession, name string, args, out any) string {
	t.Helper()
	res, txt := callTool(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: isError: %s", name, args, txt)
	}
	if schemas, ok := outputSchemas.Load(cs); ok {
		raw, _ := json.Marshal(res.StructuredContent)
		var v any
		_ = json.Unmarshal(raw, &v)
		if s := schemas.(map[string]*jsonschema.Resolved)[name]; s == nil || v == nil {
			t.Fatalf("%s: no output schema listed, or no structured result (%s)", name, raw)
		} else if err := s.Validate(&v); err != nil {
			t.Fatalf("%s: structured result %s does not match the output schema: %v", name, raw, err)
		}
	}
	if out != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			err = json.Unmarshal(raw, out)
		}
		if err != nil {
			t.Fatalf("%s: structured content %v: %v", name, res.StructuredContent, err)
		}
	}
	return txt
}

// fails calls a tool that must answer isError with the tether code; it
// returns the text.
func fails(t *testing.T, cs *sdk.ClientSession, name string, args any, code string) string {
	t.Helper()
	res, txt := callTool(t, cs, name, args)
	if !res.IsError || !strings.Contains(txt, code) {
		t.Fatalf("%s %v: want isError %s, got isError=%v %q", name, args, code, res.IsError, txt)
	}
	return txt
}

// success builds a successful response with result v.
func success(v any) protocol.ToolResponse {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return protocol.Success("c", b)
}
