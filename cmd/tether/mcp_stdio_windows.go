package main

import sdk "github.com/modelcontextprotocol/go-sdk/mcp"

// stdioTransport is the MCP transport of tether mcp: stdin and stdout, as
// sdk.StdioTransport reads and writes them. The poller path of
// mcp_stdio_unix.go needs non-blocking pipes, which Windows' anonymous
// pipes are not; blocking reads cost more CPU per call, not correctness.
func stdioTransport() (t sdk.Transport, restore func()) {
	return &sdk.StdioTransport{}, func() {}
}
