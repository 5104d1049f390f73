//go:build !windows

// Package bridge is the workspace side of tether: a Socket.IO v5 client that
// connects to a broker, serves the broker's tool_call events through a route
// table, and answers each one exactly once.
//
// # Pieces
//
//   - Bridge (bridge.go) owns everything: the connection loop with reconnect
//     and backoff (client.go, conn.go), the dispatcher that enforces the
//     guaranteed response (dispatch.go), and the optional local HTTP listener
//     that serves the same routes to harness tests (http.go).
//   - Router (router.go) is the route table. It is a gin engine used purely in
//     memory: each call becomes a POST <endpoint> request that never touches
//     the network, so gin's path parameters work unchanged.
//   - routes.go lists every route the bridge serves; each domain keeps its
//     adapter in routes_<domain>.go. The endpoint names, and the result
//     types callers decode, are package protocol's (protocol/routes.go).
//
// # Mounting a domain package
//
// Domain packages (terminal, dap, sandbox) expose plain Go APIs. A route adapts
// one of them in one line with Handle:
//
//	Handle(r, "/api/terminal/sessions/:session_id/output",
//		func(ctx context.Context, c *Call, req OutputRequest) (terminal.Output, error) {
//			return term.Output(ctx, c.Param("session_id"), req.Offset)
//		})
//
// What the adapter guarantees, so handlers need not:
//
//   - The payload is decoded into Req with encoding/json (an absent payload
//     decodes as {}), strictly: a member Req has no field for answers
//     invalid_payload naming it by its JSON path and the field it probably
//     meant (`unknown field "comand" (did you mean "command"?)`), a value
//     of the wrong type names the member and the type expected. Maps and
//     json.RawMessage in Req stay free-form. A decoding failure answers
//     invalid_payload without calling the handler. If *Req or Req has a
//     Validate() error method, a non-nil result answers invalid_payload too
//     (or the code of a *protocol.Error it returns).
//   - The returned Resp is encoded as the response's result.
//   - A returned *protocol.Error (found with errors.As) keeps its code and
//     message: use protocol.Errorf(protocol.CodeSessionNotFound, "…").
//   - Any other error returned after ctx ended answers handler_timeout or
//     cancelled (why ctx ended, whatever the error says); any other error
//     answers internal_error with the error's text.
//   - A panic answers internal_error; the stack is logged.
//   - ctx ends at the handler deadline (the call's timeout minus a margin, so
//     the answer reaches the broker before its own deadline), on tool_cancel,
//     when the broker connection drops, and when the bridge stops. A handler
//     that overruns is answered handler_timeout at its deadline without being
//     waited for, but it keeps its concurrency slot until it returns: honour
//     ctx.
//
// Handlers run concurrently, up to Config.MaxInFlight at once; beyond that,
// calls are answered overloaded at once.
//
// # What is served
//
// Config.ReadOnly and Config.Disable (policy.go) refuse routes with
// forbidden, naming the flag; they stay mounted so callers learn why.
// /api/workspace/capabilities (routes_workspace.go) lists what is served.
// The workspace file, search and git routes run package sandbox's Tree on
// the root, the code sandbox workspaces run.
package bridge
