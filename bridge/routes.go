package bridge

// mountRoutes mounts every route the bridge serves, in one place, so the
// endpoint names the IDE extensions rely on are all visible here (docs/design.md,
// "Bridge routes"). A domain adds one line below and keeps its adapter in
// routes_<domain>.go, written with Handle; b gives it the workspace root.
func mountRoutes(r *Router, b *Bridge) {
	mountPing(r)
	mountTerminal(r, b)
	mountDebug(r, b)
	mountWorkspace(r, b)
	mountSandbox(r, b)
}
