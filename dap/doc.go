//go:build !windows

// Package dap runs debug sessions through real debug adapters speaking the
// Debug Adapter Protocol: lldb-dap for C, C++ and Rust, debugpy for Python,
// delve for Go, and for Node.js (JavaScript, TypeScript through source maps)
// js-debug when installed, else tether's own CDP adapter (package dap/node),
// which needs only node. It knows nothing of tunnels; the bridge adapts it
// to routes.
//
// # Pieces
//
//   - Client (client.go) speaks DAP over one connection: one read loop, writes
//     behind one mutex, requests correlated with responses by seq, reverse
//     requests always answered, unknown events skipped.
//   - Adapter (adapter.go) describes one kind of adapter: which launch.json
//     types and languages it serves, how to find and start it, and how a
//     launch configuration is translated for it. Each adapter has its own
//     file (adapter_lldb.go, adapter_debugpy.go, adapter_delve.go) holding
//     its quirks too, as small optional interfaces the session asks for
//     (adapter.go lists them). The registry (Adapters) is a list, so a new
//     adapter is one more file set and one more entry.
//   - Discovery (discover.go) finds adapter binaries and native debuggers and
//     probes each adapter once with initialize.
//   - Session (session.go) is one debuggee: its state machine (initializing,
//     running, stopped, ended) and the "next stop" waiters that let snapshot
//     and steps wait for a pause. Its other jobs have a file each:
//     session_start.go (the handshake), session_breakpoints.go (kept per
//     file), session_control.go (continue, steps, pause), snapshot.go
//     (with focus.go, the rule of which frame's locals a stop shows),
//     output.go and session_stop.go (stop-session and the adapter's end).
//   - Manager (manager.go) holds the sessions of one workspace root; Close
//     ends them all, so no adapter or debuggee outlives it.
//   - launchjson.go reads .vscode/launch.json (JSON with comments and
//     trailing commas) and resolves ${workspaceFolder}, ${file}, ${env:X}.
//   - breakpoint_lines.go resolves breakpoints given by their line's text
//     (line_content); session_children.go runs the child sessions js-debug
//     asks for.
//   - attach.go owns remote attach: the addresses an attach may connect to
//     (Config.AttachAllow, checked and pinned before any connection), the
//     path mappings between the bridge's root and the program's side, and
//     the release of a remote debuggee on detach.
//   - failure.go makes a failed start carry its reason (what the adapter
//     printed, and the next step); exception.go gives an exception's stop
//     its type, message and stack (exceptionInfo) and checks exception
//     filters against the adapter's.
//   - warm.go keeps warm adapters (Config.WarmAdapters): one started and
//     initialized adapter per kind the workspace used, taken by the next
//     start whose adapter it matches, replaced after use, ended when idle
//     and with the manager; warm_build.go prebuilds Go programs into kept
//     binaries, so an unchanged one is not linked again, and warm_stamp.go
//     stamps each build, so that an unchanged one does not run go at all.
//   - session_restart.go restarts a launched program under the same session
//     id (the adapter's restart, else a relaunch); session_postmortem.go
//     and corefile.go open core dumps (core_file); session_watchpoints.go
//     sets data breakpoints.
//
// Failures a caller can act on are *protocol.Error values with the codes
// debug_adapter_unavailable, session_not_found, session_running,
// session_ended, unsupported (what the session's adapter, or a core file,
// cannot do), invalid_payload (also a request the adapter refused) and
// forbidden (an attach to an address the bridge does not allow); a failed
// start or request says what the adapter printed (failure.go).
package dap
