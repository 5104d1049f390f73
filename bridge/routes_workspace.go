package bridge

import (
	"context"
	"slices"
)

// Workspace endpoints: files, search and git on the bridge's own root
// (docs/workspace-files.md). They run the sandbox package's Tree, the
// code the per-workspace sandbox routes run, so both answer alike; paths
// are resolved inside the root.
const (
	WorkspaceReadFileEndpoint     = "/api/workspace/read-file"
	WorkspaceWriteFileEndpoint    = "/api/workspace/write-file"
	WorkspaceStrReplaceEndpoint   = "/api/workspace/str-replace"
	WorkspaceListDirEndpoint      = "/api/workspace/list-dir"
	WorkspaceStatEndpoint         = "/api/workspace/stat"
	WorkspaceExistsEndpoint       = "/api/workspace/exists"
	WorkspaceMkdirEndpoint        = "/api/workspace/mkdir"
	WorkspaceRmEndpoint           = "/api/workspace/rm"
	WorkspaceReaddirEndpoint      = "/api/workspace/readdir"
	WorkspaceSearchEndpoint       = "/api/workspace/search"
	WorkspaceGitStatusEndpoint    = workspaceGitPrefix + "status"
	WorkspaceGitDiffEndpoint      = workspaceGitPrefix + "diff"
	WorkspaceCapabilitiesEndpoint = "/api/workspace/capabilities"

	workspaceGitPrefix = "/api/workspace/git/"
)

// CapabilitiesResult answers /api/workspace/capabilities: what this
// bridge serves, for a client choosing which tools to offer.
type CapabilitiesResult struct {
	// Root is the directory the workspace routes serve.
	Root string `json:"root"`
	// ReadOnly: the bridge runs with --read-only; only routes that
	// neither write a file nor run a program are served.
	ReadOnly bool `json:"read_only"`
	// Groups are the route groups with at least one route served, in the
	// order of Groups() (terminal, debug, files, git, sandbox).
	Groups []string `json:"groups"`
	// Disabled are the groups switched off with --disable.
	Disabled []string `json:"disabled"`
	// Routes are the mounted routes that are served, sorted; a refused
	// route is left out.
	Routes []string `json:"routes"`
}

func mountWorkspace(r *Router, b *Bridge) {
	t := b.tree
	workspaceRoute(r, WorkspaceReadFileEndpoint, t.ReadFile)
	workspaceRoute(r, WorkspaceWriteFileEndpoint, t.WriteFile)
	workspaceRoute(r, WorkspaceStrReplaceEndpoint, t.StrReplace)
	workspaceRoute(r, WorkspaceListDirEndpoint, t.ListDir)
	workspaceRoute(r, WorkspaceStatEndpoint, t.Stat)
	workspaceRoute(r, WorkspaceExistsEndpoint, t.Exists)
	workspaceRoute(r, WorkspaceMkdirEndpoint, t.Mkdir)
	workspaceRoute(r, WorkspaceRmEndpoint, t.Rm)
	workspaceRoute(r, WorkspaceReaddirEndpoint, t.Readdir)
	workspaceRoute(r, WorkspaceSearchEndpoint, t.Search)
	workspaceRoute(r, WorkspaceGitStatusEndpoint, t.GitStatus)
	workspaceRoute(r, WorkspaceGitDiffEndpoint, t.GitDiff)
	Handle(r, WorkspaceCapabilitiesEndpoint, func(context.Context, *Call, struct{}) (CapabilitiesResult, error) {
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
func (b *Bridge) capabilities() CapabilitiesResult {
	res := CapabilitiesResult{Root: b.root, ReadOnly: b.router.policy.readOnly, Groups: []string{},
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
	for _, g := range routeGroups {
		if served[g] {
			res.Groups = append(res.Groups, g)
		}
	}
	return res
}
