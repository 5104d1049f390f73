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
	// SandboxRuntimes are the sandbox's runtimes, each with whether it
	// can run here and why not (bwrap needs Linux namespaces, and
	// bubblewrap installed); absent when the sandbox routes are not
	// served.
	SandboxRuntimes []RuntimeStatus `json:"sandbox_runtimes,omitempty"`
}

// RuntimeStatus is one sandbox runtime of CapabilitiesResult.
type RuntimeStatus struct {
	// Name is the runtime as an acquire request names it ("subprocess",
	// "bwrap").
	Name      string `json:"name"`
	Available bool   `json:"available"`
	// Reason says why a runtime is not available: the runtime_unavailable
	// message a request for it would get.
	Reason string `json:"reason,omitempty"`
}
