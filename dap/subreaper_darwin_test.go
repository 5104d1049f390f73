package dap_test

// becomeSubreaper: macOS has no subreaper; an orphaned grandchild goes to
// launchd, and only leakcheck's environment mark still finds it.
func becomeSubreaper() {}
