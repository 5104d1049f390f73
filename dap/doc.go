// Package dap runs debug sessions through real debug adapters speaking the
// Debug Adapter Protocol: lldb-dap for C, C++ and Rust, debugpy for Python and
// delve for Go. It knows nothing of tunnels; the bridge adapts it to routes.
//
// # Pieces
//
//   - Client (client.go) speaks DAP over one connection: one read loop, writes
//     behind one mutex, requests correlated with responses by seq, reverse
//     requests always answered, unknown events skipped.
//   - Adapter (adapter.go) describes one kind of adapter: which launch.json
//     types and languages it serves, how to find and start it, and how a
//     launch configuration is translated for it. The registry (Adapters) is a
//     list, so a new adapter (Node.js) is one more entry.
//   - Discovery (discover.go) finds adapter binaries and native debuggers and
//     probes each adapter once with initialize.
//   - Session (session.go) is one debuggee: its state machine (initializing,
//     running, stopped, ended), breakpoints kept per file, output and the
//     "next stop" waiters that let snapshot and steps wait for a pause.
//   - Manager (manager.go) holds the sessions of one workspace root; Close
//     ends them all, so no adapter or debuggee outlives it.
//   - launchjson.go reads .vscode/launch.json (JSON with comments and
//     trailing commas) and resolves ${workspaceFolder}, ${file}, ${env:X}.
//
// Failures a caller can act on are *protocol.Error values with the codes
// debug_adapter_unavailable, session_not_found, session_running,
// session_ended and invalid_payload.
package dap
