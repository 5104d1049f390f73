package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/internal/tracing"
)

// traceContext returns ctx carrying the trace context of a tools/call: its
// params._meta.traceparent (and tracestate), the MCP convention (SEP-414)
// that works over stdio as over HTTP, or else the traceparent header of the
// HTTP request it came in. The tool's tether calls continue it: the
// broker's MCP endpoint starts their spans from it (api.API.Call), and
// tether mcp sends it to the broker as their traceparent header
// (caller.HTTP). A malformed one is ignored (tracing.Continue).
func (s *Server) traceContext(ctx context.Context, req *sdk.CallToolRequest) context.Context {
	var tp, ts string
	if req.Params != nil {
		meta := req.Params.GetMeta()
		tp, _ = meta["traceparent"].(string)
		ts, _ = meta["tracestate"].(string)
	}
	if tp == "" && req.Extra != nil && req.Extra.Header != nil {
		tp, ts = req.Extra.Header.Get("traceparent"), req.Extra.Header.Get("tracestate")
	}
	out, _ := tracing.Continue(ctx, tp, ts, s.opts.Logger.Debug, "tool call")
	return out
}
