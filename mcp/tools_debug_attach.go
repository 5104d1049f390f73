package mcp

import (
	"context"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// debug_attach: a session attached to a program that already runs, under
// a debug server listening on a port (remote attach, dap/attach.go) or as a
// process of the workspace's machine.

// pathMapping says where the workspace's sources are on the debuggee's side.
type pathMapping struct {
	LocalRoot  string `json:"local_root" jsonschema:"a directory in the workspace, relative to its root (. for the root itself)"`
	RemoteRoot string `json:"remote_root" jsonschema:"the absolute path of the same sources where the program was built or runs, e.g. /app in a container"`
}

type attachArgs struct {
	Language         string           `json:"language" enum:"python,go,c,cpp,rust,javascript,typescript" jsonschema:"the program's language: python (debugpy), go (delve), c/cpp/rust (lldb), javascript/typescript (node)"`
	Host             string           `json:"host,omitempty" jsonschema:"where the debug server listens; default 127.0.0.1. The bridge attaches only to addresses its operator allowed (loopback by default)"`
	Port             int              `json:"port,omitempty" min:"1" max:"65535" jsonschema:"the debug server's port: python -m debugpy --listen PORT, dlv exec|debug|attach --headless --accept-multiclient --listen :PORT, node --inspect=PORT"`
	Pid              int              `json:"pid,omitempty" min:"1" jsonschema:"instead of port: the id of a process on the workspace's machine to attach to (c, cpp, rust, go, javascript)"`
	PathMappings     []pathMapping    `json:"path_mappings,omitempty" jsonschema:"when the program's sources are elsewhere than in the workspace (a container, another machine, another checkout): breakpoints set on workspace files bind in the program, and stops report workspace paths"`
	Breakpoints      []fileBreakpoint `json:"breakpoints,omitempty" jsonschema:"breakpoints set as the session attaches, on workspace files"`
	ExceptionFilters []string         `json:"exception_filters,omitempty" jsonschema:"which exceptions stop the program, by the adapter's filter names listed by debug_context (as debug_start takes them); a stop on one shows the exception's type, message and stack"`
	TimeoutS         float64          `json:"timeout_s,omitempty" min:"1" max:"600" default:"30" jsonschema:"seconds to wait for the attach; default 30"`
}

func (a attachArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

func addDebugAttachTool(s *Server) {
	add(s, spec{
		name:  "debug_attach",
		title: "Attach to a running program",
		description: "Attach a debug session to a program that is already running: to its debug server at host:port (python -m debugpy --listen, dlv --headless --accept-multiclient, node --inspect), or to a local process by pid. " +
			"Use it for a service or a program in a container or on another machine that you cannot start with debug_start. " +
			"When the program's sources sit in another directory than the workspace's (e.g. /app in a container), give path_mappings [{local_root, remote_root}]: breakpoints on workspace files then bind in the program and its stops show workspace paths. " +
			"Returns the session_id and where each breakpoint went; then call debug_continue, which waits for the next stop. debug_stop detaches and leaves the program running. " +
			"A port nobody listens on, or an address the bridge does not allow, is an error naming the argument.",
		routes: []string{protocol.DebugStartEndpoint}, destructive: true,
	}, attachSession)
}

func attachSession(ctx context.Context, tc *toolCall, in attachArgs) (dap.StartResult, string, error) {
	payload := map[string]any{"language": in.Language, "request": "attach"}
	switch {
	case in.Port > 0 && in.Pid > 0:
		return dap.StartResult{}, "", protocol.Errorf(protocol.CodeInvalidPayload, "port: give port (a debug server) or pid (a local process), not both")
	case in.Port > 0:
		payload["connect"] = map[string]any{"host": in.Host, "port": in.Port}
	case in.Pid > 0:
		if in.Host != "" {
			return dap.StartResult{}, "", protocol.Errorf(protocol.CodeInvalidPayload, "host: a pid attaches to a local process; host goes with port")
		}
		payload["pid"] = in.Pid
	default:
		return dap.StartResult{}, "", protocol.Errorf(protocol.CodeInvalidPayload, "port: give port (the debug server's) or pid (a local process)")
	}
	if len(in.PathMappings) > 0 {
		payload["path_mappings"] = in.PathMappings
	}
	if in.ExceptionFilters != nil {
		payload["exception_filters"] = in.ExceptionFilters
	}
	return startAndShow(ctx, tc, payload, in.Breakpoints, in.timeout())
}
