package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tetherdev/tether/broker/caller"
)

// runCall prints the ToolResponse and exits 0 on success, 1 on a failed
// call, 2 on a usage error.
func runCall(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokerURL := fs.String("broker", env("TETHER_BROKER", "http://127.0.0.1:8377"), "broker URL")
	token := fs.String("token", env("TETHER_TOKEN", ""), "caller token")
	workspace := fs.String("workspace", env("TETHER_WORKSPACE", ""), "workspace id")
	timeout := fs.Float64("timeout", 30, "seconds the call may take, 0.1 to 600")
	wait := fs.Bool("wait", false, "if the workspace is offline, wait for it (up to the timeout)")
	waitFor := fs.Duration("wait-for", 0, "if the workspace is offline, wait this long at most for it (as wait_for_workspace_ms)")
	compact := fs.Bool("compact", false, "print the response on one line")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tether call [flags] ENDPOINT [PAYLOAD_JSON | -]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return 2
	}
	if *workspace == "" {
		fmt.Fprintln(stderr, "tether call: --workspace is required")
		return 2
	}
	var payload json.RawMessage
	if fs.NArg() == 2 {
		raw := []byte(fs.Arg(1))
		if fs.Arg(1) == "-" {
			var err error
			if raw, err = io.ReadAll(os.Stdin); err != nil {
				fmt.Fprintf(stderr, "tether call: reading payload: %v\n", err)
				return 2
			}
		}
		if !json.Valid(raw) {
			fmt.Fprintf(stderr, "tether call: payload is not valid JSON: %.100s\n", raw)
			return 2
		}
		payload = raw
	}
	ctx, stop := signalContext()
	defer stop()
	c := &caller.HTTP{BaseURL: *brokerURL, Token: *token}
	req := caller.Request{
		WorkspaceID: *workspace,
		Endpoint:    fs.Arg(0),
		Payload:     payload,
		Timeout:     time.Duration(*timeout * float64(time.Second)),
	}
	req.WaitForWorkspace = *waitFor
	if *wait {
		req.WaitForWorkspace = req.Timeout
	}
	resp := c.Call(ctx, req)
	var out []byte
	if *compact {
		out, _ = json.Marshal(resp)
	} else {
		out, _ = json.MarshalIndent(resp, "", "  ")
	}
	fmt.Fprintln(stdout, string(out))
	if !resp.Success {
		return 1
	}
	return 0
}
