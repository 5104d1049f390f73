// Package broker relays tool calls from callers to the workspace clients
// connected over WebSocket (Socket.IO v5 over Engine.IO v4), and brings back
// exactly one ToolResponse per call.
//
// This package is the routing core: a Broker holds the workspaces whose
// clients are connected to it (conn: takeover.go), hands each call to the
// one connection holding its workspace (deliver.go) and keeps every call in
// that connection's pending-call table until its one answer (calls.go).
// Routing goes through a bus.Bus: the broker that holds a workspace's
// socket subscribes to its channel; a call is published there with the
// caller's inbox as reply_to. Async calls wait in the store's queue and are
// drained by the holder (package async). New wires the rooms below
// together.
//
// The rooms, each a package with one job:
//
//	broker          the routing core (this package), and New, which wires the rest
//	broker/eio      the Engine.IO server side: /socket.io/, WebSocket and long-polling
//	                transports, upgrade, heartbeats, the per-address connection limits,
//	                sessions that hand their Socket.IO packets to the core (eio.Handler)
//	broker/api      the caller HTTP API: gin's routes and the call server, one path per
//	                call (acceptCall, begin, end), async submit/status/cancel, /metrics,
//	                and the door of the MCP endpoint, whose server is mounted from outside
//	broker/async    the owner's side of async calls: a holder's drain of its workspace's
//	                queue, submits handed to a local holder, outcomes, the sweep
//	broker/auth     tokens: issuing and verifying (roles, workspaces, keys)
//	broker/proxy    the client's address of a request behind trusted reverse proxies
//	broker/revoke   the revocation list Verify asks (memory, or shared on Redis), and the
//	                live sockets and MCP requests a revocation ends
//	broker/caller   the caller side of the bus: a call published, its answer awaited
//	broker/bus      the bus: in memory, or Redis and Redis Cluster pub/sub
//	broker/store    the records of async calls: in memory, or Redis
//
// Where a new thing goes: TLS is on the listener the call server accepts
// on (api.Server's accepting, which eio's sessions come through; the
// certificate comes from cmd/tether, in http.Server.TLSConfig); how a token
// is trusted (keys, JWKS) in broker/auth behind Verifier.Verify, which every
// door calls, and revocation in broker/revoke, which Verify asks; a trace
// span or an audit line of a call at its entry in broker/api (begin and
// end, submit), at its delivery and answer in this package (deliver.go,
// calls.go finish), of a connection in handshake.go (CONNECT) and conn.go
// (Ended).
//
// The core never imports the workspace side (bridge, dap, terminal,
// sandbox) nor package mcp: cmd/tether mounts mcp's endpoint into the API
// (Config.MCP).
package broker
