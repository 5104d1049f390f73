//go:build !windows

package bridge

import (
	"context"
	"slices"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// mountWorkspace mounts the files, search and git routes on the bridge's
// own root. They run the sandbox package's Tree, the code the
// per-workspace sandbox routes run, so both answer alike; paths are
// resolved inside the root.
func mountWorkspace(r *Router, b *Bridge) {
	t := b.tree
	workspaceRoute(r, protocol.WorkspaceReadFileEndpoint, t.ReadFile)
	workspaceRoute(r, protocol.WorkspaceWriteFileEndpoint, t.WriteFile)
	workspaceRoute(r, protocol.WorkspaceStrReplaceEndpoint, t.StrReplace)
	workspaceRoute(r, protocol.WorkspaceListDirEndpoint, t.ListDir)
	workspaceRoute(r, protocol.WorkspaceStatEndpoint, t.Stat)
	workspaceRoute(r, protocol.WorkspaceExistsEndpoint, t.Exists)
	workspaceRoute(r, protocol.WorkspaceMkdirEndpoint, t.Mkdir)
	workspaceRoute(r, protocol.WorkspaceRmEndpoint, t.Rm)
	workspaceRoute(r, protocol.WorkspaceReaddirEndpoint, t.Readdir)
	workspaceRoute(r, protocol.WorkspaceSearchEndpoint, t.Search)
	workspaceRoute(r, protocol.WorkspaceGitStatusEndpoint, t.GitStatus)
	workspaceRoute(r, protocol.WorkspaceGitDiffEndpoint, t.GitDiff)
	Handle(r, protocol.WorkspaceCapabilitiesEndpoint, func(context.Context, *Call, struct{}) (protocol.CapabilitiesResult, error) {
		return b.capabilities(), nil
	})
}

// workspaceRoute mounts one operation of the root's Tree.
func workspaceRoute[Req, Resp any](r *Router, path string, op func(context.Context, Req) (Resp, error)) {
	Handle(r, path, func(ctx context.Context, _ *Call, req Req) (Resp, error) {
		return op(ctx, req)
	})
}

// capabilities reports the served routes; the router is frozen by then,
// so its table no longer changes.
func (b *Bridge) capabilities() protocol.CapabilitiesResult {
	res := protocol.CapabilitiesResult{Root: b.root, ReadOnly: b.router.policy.readOnly, Groups: []string{},
		Disabled: append([]string{}, b.router.policy.disabled...), Routes: []string{}}
	served := map[string]bool{}
	for _, path := range b.router.Routes() {
		if b.router.policy.refusal(path) != nil {
			continue
		}
		res.Routes = append(res.Routes, path)
		served[routeGroup(path)] = true
	}
	slices.Sort(res.Routes)
	if served[GroupSandbox] && b.sbxRuntimes != nil {
		res.SandboxRuntimes = sandbox.RuntimeStatuses(b.sbxRuntimes)
	}
	for _, g := range routeGroups {
		if served[g] {
			res.Groups = append(res.Groups, g)
		}
	}
	return res
}
