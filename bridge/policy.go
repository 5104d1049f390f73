//go:build !windows

package bridge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tetherdev/tether/protocol"
)

// What the person running the bridge lets it serve: Config.ReadOnly
// (tether bridge --read-only) and Config.Disable (--disable). A refused
// route stays mounted and answers forbidden, with a message naming the
// flag, so a caller learns why; /api/workspace/capabilities lists what is
// served.

// Route groups, the units Config.Disable switches off.
const (
	GroupTerminal = "terminal" // /api/terminal/…, and `tether attach`
	GroupDebug    = "debug"    // /api/debug/…, /api/workspace/debug-context
	GroupFiles    = "files"    // /api/workspace/ file and search routes
	GroupGit      = "git"      // /api/workspace/git/…
	GroupSandbox  = "sandbox"  // /api/sandbox/…
)

// routeGroups lists every route group, in the order capabilities reports
// them.
var routeGroups = []string{GroupTerminal, GroupDebug, GroupFiles, GroupGit, GroupSandbox}

// Groups returns every route group's name, in the order capabilities
// reports them.
func Groups() []string { return slices.Clone(routeGroups) }

// readOnlyRoutes are the routes served under ReadOnly: those that neither
// change a file nor run anything. Every other route, one mounted by the
// embedding program included, is refused: a route that is not known to be
// harmless is treated as one that is not.
var readOnlyRoutes = map[string]bool{
	protocol.PingEndpoint:                  true,
	protocol.WorkspaceCapabilitiesEndpoint: true,
	protocol.DebugContextEndpoint:          true,
	protocol.WorkspaceReadFileEndpoint:     true,
	protocol.WorkspaceListDirEndpoint:      true,
	protocol.WorkspaceStatEndpoint:         true,
	protocol.WorkspaceExistsEndpoint:       true,
	protocol.WorkspaceReaddirEndpoint:      true,
	protocol.WorkspaceSearchEndpoint:       true,
	protocol.WorkspaceGitStatusEndpoint:    true,
	protocol.WorkspaceGitDiffEndpoint:      true,
}

// routeGroup returns the group of a mounted route path; "" for the routes
// no flag switches off (ping, capabilities) and for routes the embedding
// program mounted outside the groups.
func routeGroup(path string) string {
	switch {
	case path == protocol.PingEndpoint, path == protocol.WorkspaceCapabilitiesEndpoint:
		return ""
	case strings.HasPrefix(path, "/api/terminal/"):
		return GroupTerminal
	case strings.HasPrefix(path, "/api/debug/"), path == protocol.DebugContextEndpoint:
		return GroupDebug
	case strings.HasPrefix(path, "/api/sandbox/"):
		return GroupSandbox
	case strings.HasPrefix(path, protocol.WorkspaceGitPrefix):
		return GroupGit
	case strings.HasPrefix(path, protocol.WorkspacePrefix):
		return GroupFiles
	}
	return ""
}

// policy is what Config.ReadOnly and Config.Disable allow. It is
// read-only after newPolicy and safe for concurrent use.
type policy struct {
	readOnly bool
	disabled []string // sorted group names
}

func newPolicy(readOnly bool, disable []string) (policy, error) {
	p := policy{readOnly: readOnly}
	for _, g := range disable {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		if !slices.Contains(routeGroups, g) {
			return policy{}, fmt.Errorf("bridge: unknown route group %q to disable (--disable); the groups are %s", g, strings.Join(routeGroups, ", "))
		}
		if !slices.Contains(p.disabled, g) {
			p.disabled = append(p.disabled, g)
		}
	}
	slices.Sort(p.disabled)
	return p, nil
}

// refusal returns the forbidden error a call to the route at path
// answers, or nil when the route is served.
func (p policy) refusal(path string) error {
	if g := routeGroup(path); g != "" && slices.Contains(p.disabled, g) {
		return protocol.Errorf(protocol.CodeForbidden, "%s is refused: the %s routes are switched off on this bridge (--disable %s)", path, g, g)
	}
	if p.readOnly && !readOnlyRoutes[path] {
		return protocol.Errorf(protocol.CodeForbidden, "%s is refused: this bridge is read-only (--read-only): nothing that writes a file or runs a program is served", path)
	}
	return nil
}
