//go:build !windows

// Package node is tether's built-in Node.js debug adapter: a Debug Adapter
// Protocol server, written in Go, that drives node's V8 inspector over the
// Chrome DevTools Protocol. It needs nothing but node on the machine (VS
// Code's js-debug, the usual Node adapter, ships only as a release
// tarball).
//
// It runs in the bridge's process, served over an in-memory pipe, rather
// than as a `tether __node-dap` child: no process start per session (the
// start of a session is what the debug benchmark measures), and the dap
// package's tests use it directly. What a separate process would give, a
// crash that cannot take the bridge down, is had by recovering every
// handler's panic into a failed response; and node itself is a child of
// the bridge in its own process group, killed with the bridge (proctree.Start)
// and ended with its process tree on disconnect.
//
// # Pieces
//
//   - server.go: the DAP side (Serve): one read loop, one goroutine per
//     request, serialised writes.
//   - debugger.go: the debuggee as seen through CDP, its pause and the
//     mapping of CDP events to DAP events.
//   - warm.go, warm_run.go: warm nodes, started ahead with the inspector
//     connected, which a launch takes instead of starting node.
//   - launch.go, process.go: starting node --inspect-brk (and reading its
//     inspector URL from stderr), or attaching by address or pid.
//   - breakpoints.go, functions.go: line, conditional, hit-count, log and
//     function breakpoints, and exception pauses.
//   - inspect.go: stack frames, scopes, variables, evaluate.
//   - sourcemap.go: TypeScript and other compiled code through source maps.
//   - conn.go: a CDP connection over github.com/coder/websocket that
//     implements cdproto's cdp.Session, so the typed commands of
//     github.com/chromedp/cdproto run on it.
//   - inspector.go: the inspector URL line and target list (fuzzed).
package node
