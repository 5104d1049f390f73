package main

import (
	"errors"
	"fmt"
	"io"
)

// The message tether bridge, up and attach give on Windows
// (wsl_windows.go), here for every platform so that its test runs where
// the tests run.

// wslHowTo is what tether bridge, up and attach print on Windows.
const wslHowTo = `tether %[1]s runs the bridge side of tether, which needs a Unix system
(process groups, terminals, debug adapters): on Windows, run it inside WSL.

In PowerShell, once (then restart Windows):
  wsl --install

Then in a WSL shell (type wsl), with Go 1.26 or later installed there:
  go install github.com/tetherdev/tether/cmd/tether@latest
  cd ~/src/your-project        # keep code in WSL's own disk: /mnt/c works, slowly
  ~/go/bin/tether up --root .  # a broker and a bridge, reachable from Windows at localhost
or, to serve a broker that runs elsewhere (this Windows tether broker included):
  ~/go/bin/tether bridge --broker URL --workspace ID --token T --root .

tether broker, call, calls, token, keys, revoke and mcp run on Windows as they are.
`

// inWSL prints where to run command and fails.
func inWSL(command string, stderr io.Writer) error {
	fmt.Fprintf(stderr, wslHowTo, command)
	return errors.New("not available on Windows: run it inside WSL (above)")
}
