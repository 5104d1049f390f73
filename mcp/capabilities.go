package mcp

import (
	"context"
	"slices"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools listed reflect what the workspace serves: at every tools/list
// the server asks the workspace which route groups it serves and whether it
// is read-only, and leaves out the tools that would only be refused. A
// workspace that cannot tell (an IDE extension, an older bridge, or one
// that is offline right now) gets the whole catalog; a tool it does not
// serve then answers unknown_route or forbidden.

// CapabilitiesEndpoint is the bridge route that tells what it serves.
const CapabilitiesEndpoint = "/api/workspace/capabilities"

// Route groups a bridge can serve (and the person running it switch off).
const (
	groupTerminal = "terminal"
	groupFiles    = "files"
	groupSearch   = "search"
	groupGit      = "git"
	groupDebug    = "debug"
	groupSandbox  = "sandbox"
)

// capabilities is the answer of CapabilitiesEndpoint.
type capabilities struct {
	// Groups are the route groups served.
	Groups []string `json:"groups"`
	// ReadOnly: nothing on the bridge's root may be written, and no command
	// run there.
	ReadOnly bool `json:"read_only"`
}

// serves reports whether a tool is worth listing on a workspace with caps.
func (c *capabilities) serves(sp spec) bool {
	sandbox := slices.Contains(c.Groups, groupSandbox)
	if sp.sandboxOnly {
		return sandbox
	}
	onRoot := slices.Contains(c.Groups, sp.group) && !(sp.writes && c.ReadOnly)
	return onRoot || (sp.sandbox && sandbox)
}

// capabilities asks the workspace what it serves; nil when it cannot tell.
func (s *Server) capabilities(ctx context.Context) *capabilities {
	tc := &toolCall{s: s, name: "tools/list"}
	var caps capabilities
	if err := tc.call(ctx, CapabilitiesEndpoint, struct{}{}, capabilitiesWait, &caps); err != nil {
		s.opts.Logger.Debug().Str("workspace_id", s.opts.Workspace).Err(err).Msg("mcp: workspace capabilities unknown; listing every tool")
		return nil
	}
	return &caps
}

// capabilitiesWait bounds the question, so tools/list answers promptly.
const capabilitiesWait = 3 * time.Second

// listServed is a receiving middleware: it filters the result of
// tools/list by the workspace's capabilities.
func (s *Server) listServed(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*sdk.ListToolsResult)
		if err != nil || method != "tools/list" || !ok {
			return res, err
		}
		caps := s.capabilities(ctx)
		if caps == nil {
			return res, nil
		}
		served := make([]*sdk.Tool, 0, len(list.Tools))
		for _, t := range list.Tools {
			if sp, known := s.specs[t.Name]; !known || caps.serves(sp) {
				served = append(served, t)
			}
		}
		out := *list
		out.Tools = served
		return &out, nil
	}
}
