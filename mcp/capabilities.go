package mcp

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/protocol"
)

// The tools listed reflect what the workspace serves: at every tools/list
// the server asks the bridge for its capabilities (the routes it serves,
// after --read-only and --disable) and leaves out the tools none of whose
// routes is served. A workspace that cannot tell (an IDE extension, an
// older bridge, or one that is offline right now) gets the whole catalog;
// a tool it does not serve then answers unknown_route or forbidden.

// capabilitiesWait bounds the question, so tools/list answers promptly.
const capabilitiesWait = 3 * time.Second

// served reports whether a tool is worth listing: one of its routes is
// among the served ones. Routes are gin patterns (":session_id"); any
// parameter name matches any other.
func served(sp spec, routes []string) bool {
	for _, want := range sp.routes {
		if slices.ContainsFunc(routes, func(r string) bool { return samePattern(r, want) }) {
			return true
		}
	}
	return false
}

func samePattern(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		if as[i] != bs[i] && !(strings.HasPrefix(as[i], ":") && strings.HasPrefix(bs[i], ":")) {
			return false
		}
	}
	return true
}

// capabilities asks the workspace what it serves; nil when it cannot tell
// (the route is not served, or answers no routes).
// It remembers the workspace's root for stop views (root).
func (s *Server) capabilities(ctx context.Context) *protocol.CapabilitiesResult {
	ctx, cancel := context.WithTimeout(ctx, capabilitiesWait)
	defer cancel()
	tc := &toolCall{s: s, name: "capabilities"}
	var caps protocol.CapabilitiesResult
	if err := tc.call(ctx, protocol.WorkspaceCapabilitiesEndpoint, struct{}{}, capabilitiesWait, &caps); err != nil {
		s.opts.Logger.Debug().Str("workspace_id", s.opts.Workspace).Err(err).Msg("mcp: workspace capabilities unknown")
		return nil
	}
	if caps.Root != "" {
		s.root.Store(&caps.Root)
	}
	if len(caps.Routes) == 0 {
		return nil // not an answer a bridge gives: every bridge serves some route
	}
	return &caps
}

// root returns the directory the workspace's bridge serves ("" when it
// cannot tell), asking once.
func (s *Server) workspaceRoot(ctx context.Context) string {
	if r := s.root.Load(); r != nil {
		return *r
	}
	if caps := s.capabilities(ctx); caps != nil {
		return caps.Root
	}
	return ""
}

// rootCache holds the workspace's root as the bridge last reported it.
type rootCache = atomic.Pointer[string]

// listServed is a receiving middleware on tools/list: it leaves out the
// tools the workspace does not serve, and gives each tool its output schema
// (see add).
func (s *Server) listServed(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*sdk.ListToolsResult)
		if err != nil || method != "tools/list" || !ok {
			return res, err
		}
		caps := s.capabilities(ctx)
		shown := make([]*sdk.Tool, 0, len(list.Tools))
		for _, t := range list.Tools {
			sp, known := s.specs[t.Name]
			if !known {
				shown = append(shown, t)
				continue
			}
			if caps == nil || served(sp, caps.Routes) {
				withOutput := *t
				withOutput.OutputSchema = sp.output
				shown = append(shown, &withOutput)
			}
		}
		out := *list
		out.Tools = shown
		return &out, nil
	}
}
