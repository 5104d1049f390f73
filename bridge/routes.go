//go:build !windows

package bridge

// mountRoutes mounts every route the bridge serves, in one place, so the
// routes the IDE extensions rely on are all visible here (docs/design.md,
// "Bridge routes"); their endpoint names are listed in protocol/routes.go,
// where callers find them too. A domain adds one line below and keeps its
// adapter in routes_<domain>.go, written with Handle; b gives it the
// workspace root.
func mountRoutes(r *Router, b *Bridge) {
	mountPing(r)
	mountTerminal(r, b)
	mountDebug(r, b)
	mountWorkspace(r, b)
	mountSandbox(r, b)
}
