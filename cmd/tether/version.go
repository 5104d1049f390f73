package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/tetherdev/tether/internal/buildinfo"
)

// runVersion prints the build's version, commit, commit time and Go
// version: one line, or with --json one JSON object (buildinfo.Info), for
// scripts and the release test that check which commit a binary is.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the build info as one JSON object")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	in := buildinfo.Get()
	if !*asJSON {
		_, err := fmt.Fprintln(stdout, "tether", in)
		return err
	}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
