package terminal

// platformShellEnv is what this platform's visible bash needs in its
// environment: nothing on Linux.
var platformShellEnv map[string]string
