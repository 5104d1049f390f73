package main

import (
	"bytes"
	"strings"
	"testing"
)

// On Windows, tether bridge, up and attach fail naming WSL and the
// commands that run them there.
func TestInWSLNamesTheCommandsAndFails(t *testing.T) {
	for _, command := range []string{"bridge", "up", "attach"} {
		var stderr bytes.Buffer
		if err := inWSL(command, &stderr); err == nil {
			t.Fatalf("inWSL(%s) = nil, want an error (a non-zero exit)", command)
		}
		out := stderr.String()
		for _, want := range []string{
			"tether " + command + " runs the bridge side",
			"wsl --install",
			"go install github.com/tetherdev/tether/cmd/tether@latest",
			"tether up --root .",
			"tether bridge --broker URL --workspace ID --token T --root .",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("tether %s on Windows prints no %q:\n%s", command, want, out)
			}
		}
	}
}
