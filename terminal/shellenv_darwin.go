package terminal

// platformShellEnv is what this platform's visible bash needs in its
// environment. macOS's /bin/bash (3.2) prints a notice that the default
// shell is now zsh when it starts interactively, unless told not to; it
// would land in the first command's output. The setup line needs nothing
// newer than bash 3.2 (PS0 is only a variable there).
var platformShellEnv = map[string]string{"BASH_SILENCE_DEPRECATION_WARNING": "1"}
