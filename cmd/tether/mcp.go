package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/buildinfo"
	"github.com/tetherdev/tether/mcp"
	"github.com/tetherdev/tether/protocol"
)

// runMCP serves one workspace's tools over MCP on stdin and stdout, for MCP
// clients that start their servers as processes. Every tool call is an
// ordinary call to the broker's HTTP API. stdout carries the protocol
// alone: logs go to stderr.
func runMCP(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokerURL := fs.String("broker", "http://127.0.0.1:8377", "broker URL")
	token := fs.String("token", "", "caller token for the workspace")
	workspace := fs.String("workspace", "", "workspace id the tools act on")
	var cf caFlags
	cf.register(fs)
	mkLog := logFlags(fs, stderr)
	setDefault(fs, "log-level", "warn")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	log, err := mkLog()
	if err != nil {
		return err
	}
	if *workspace == "" {
		return usagef("--workspace is required")
	}
	// Every tool call is relayed to the broker: on the calling goroutine
	// (caller.Transport), not through net/http's connection goroutines.
	client, err := cf.callerClient(log)
	if err != nil {
		return err
	}
	c := &caller.HTTP{BaseURL: *brokerURL, Token: *token, Client: client}
	ctx, stop := signalContext()
	defer stop()
	if err := checkCaller(ctx, c, *workspace, log); err != nil {
		return err
	}
	srv, err := mcp.New(mcp.Options{Caller: c, Workspace: *workspace, Version: buildinfo.Version(), Logger: log})
	if err != nil {
		return err
	}
	transport, restore := stdioTransport()
	defer restore()
	err = srv.Run(ctx, transport)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil // a signal, or the client closed our stdin
	}
	return err
}

// startCheckWait bounds the check at start: a ping through the broker.
const startCheckWait = 3 * time.Second

// checkCaller asks the broker, with a ping call, whether the token may call
// the workspace, so a wrong or another workspace's token fails at start and
// not at the first tool call. An offline workspace is fine: its bridge may
// come later.
func checkCaller(ctx context.Context, c *caller.HTTP, workspace string, log zerolog.Logger) error {
	resp := c.Call(ctx, caller.Request{WorkspaceID: workspace, Endpoint: protocol.PingEndpoint, Payload: []byte(`{}`), Timeout: startCheckWait})
	switch resp.Error {
	case protocol.CodeBrokerUnreachable:
		return fmt.Errorf("cannot reach the broker at %s: %s", c.BaseURL, resp.Message)
	case protocol.CodeUnauthorized, protocol.CodeForbidden, protocol.CodeInvalidRequest:
		return fmt.Errorf("the broker at %s refused calls to workspace %q: %s: %s", c.BaseURL, workspace, resp.Error, resp.Message)
	case protocol.CodeWorkspaceOffline:
		log.Warn().Str("workspace_id", workspace).Msg("nothing serves the workspace yet; tools answer workspace_offline until a bridge connects")
	}
	return nil
}
