package main

import "io"

// The bridge serves a directory through Unix processes (process groups,
// ptys, signals) and debug adapters started as Unix children, none of
// which Windows has; on Windows it runs inside WSL. tether bridge, up and
// attach say so, with the commands, and exit non-zero (docs/platforms.md).

// reaperMain does nothing: no bridge runs on Windows, so none re-executes
// this binary as its terminal's reaper.
func reaperMain() {}

func runBridge(_ []string, stderr io.Writer) error { return inWSL("bridge", stderr) }

func runUp(_ []string, _, stderr io.Writer) error { return inWSL("up", stderr) }

func runAttach(_ []string, _, stderr io.Writer) error { return inWSL("attach", stderr) }
