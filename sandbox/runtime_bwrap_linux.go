package sandbox

// bwrapPlatform: bubblewrap runs on Linux; whether it can here is probed.
func bwrapPlatform() error { return nil }
