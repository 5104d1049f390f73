// Package mcp serves tether to agents as Model Context Protocol tools, on
// the official Go SDK (github.com/modelcontextprotocol/go-sdk). A Server
// holds the catalog for one tether workspace: each tool maps to one or a few
// tether calls on that workspace (terminal, files, search, git, sandbox,
// debugging) and returns compact text a model reads well, plus the result
// as structured content.
//
// Two ways in use it: `tether mcp` serves a Server over stdio and makes its
// calls through a broker's HTTP API (*caller.HTTP); the broker serves a
// Server per workspace over the streamable HTTP transport at
// /api/v1/workspaces/{id}/mcp and makes its calls on its own call path.
// The package knows nothing of either: it needs a Caller.
//
// Time: every tool call ends by its deadline. Tools that wait for the
// program (a command, a debug session's next stop) take timeout_s and end
// within it plus a few seconds; while they wait they send progress
// notifications to a client that asked for them. A tool call the client
// cancels cancels its tether call (the workspace gets tool_cancel).
//
// Failures are tool results with isError set: the tether error code, its
// message, and one sentence on what to do next (errors.go).
package mcp
