package protocol

// CapabilitiesResult answers WorkspaceCapabilitiesEndpoint: what the
// bridge serves, for a client choosing which tools to offer.
type CapabilitiesResult struct {
	// Root is the directory the workspace routes serve.
	Root string `json:"root"`
	// ReadOnly: the bridge runs with --read-only; only routes that
	// neither write a file nor run a program are served.
	ReadOnly bool `json:"read_only"`
	// Groups are the route groups with at least one route served, in the
	// order of bridge.Groups() (terminal, debug, files, git, sandbox).
	Groups []string `json:"groups"`
	// Disabled are the groups switched off with --disable.
	Disabled []string `json:"disabled"`
	// Routes are the mounted routes that are served, sorted; a refused
	// route is left out.
	Routes []string `json:"routes"`
}
