//go:build !windows

// These tests serve a workspace with a bridge in process, which does not
// build on Windows (docs/platforms.md).

package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/mcp"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

// instantTrue answers every call at once as `true` run by the terminal: the
// benchmarks below measure the MCP layer alone.
func instantTrue() *fakeWorkspace {
	res := success(terminal.ExecResult{Success: true, Command: "true", Terminal: terminal.TerminalVisible, Cwd: "/w", DurationMS: 1})
	return &fakeWorkspace{answer: func(context.Context, caller.Request) protocol.ToolResponse { return res }}
}

func benchCall(b *testing.B, cs *sdk.ClientSession) {
	ctx := context.Background()
	params := &sdk.CallToolParams{Name: "terminal_run", Arguments: map[string]any{"command": "true"}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		res, err := cs.CallTool(ctx, params)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkToolCallInMemory: one terminal_run over the SDK's in-memory
// transport, the workspace answering at once.
func BenchmarkToolCallInMemory(b *testing.B) {
	ws := instantTrue()
	cs := client(b, ws, nil)
	benchCall(b, cs)
}

// BenchmarkToolCallStreamableHTTP: the same over the streamable HTTP
// transport on loopback, as the broker serves it.
func BenchmarkToolCallStreamableHTTP(b *testing.B) {
	s, err := mcp.New(mcp.Options{Caller: instantTrue(), Workspace: "ws", Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.SDK() }, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer s.Close()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	benchCall(b, cs)
}
