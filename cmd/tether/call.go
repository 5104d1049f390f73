package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// runCall prints the ToolResponse and exits 0 on success, 1 on a failed
// call, 2 on a usage error. With --async it submits the call, prints its
// correlation id and exits 0, or 1 when it could not be made or failed at
// once (an offline workspace); `tether calls` reads and ends it.
func runCall(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("call", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokerURL := fs.String("broker", "http://127.0.0.1:8377", "broker URL")
	token := fs.String("token", "", "caller token")
	workspace := fs.String("workspace", "", "workspace id")
	timeout := fs.Float64("timeout", 30, "seconds the call may take, 0.1 to 600")
	wait := fs.Bool("wait", false, "if the workspace is offline, wait for it (up to the timeout)")
	waitFor := fs.Duration("wait-for", 0, "if the workspace is offline, wait this long at most for it (as wait_for_workspace_ms)")
	compact := fs.Bool("compact", false, "print the response on one line")
	async := fs.Bool("async", false, "submit a durable async call and print its id; see 'tether calls'")
	key := fs.String("idempotency-key", "", "with --async: a retry with the same key returns the call already made")
	var cf caFlags
	cf.register(fs)
	var tf traceFlags
	tf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tether call [flags] ENDPOINT [PAYLOAD_JSON | -]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return parseStatus(fs, err)
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return 2
	}
	if *workspace == "" {
		fmt.Fprintln(stderr, "tether call: --workspace is required")
		return 2
	}
	if *key != "" && !*async {
		fmt.Fprintln(stderr, "tether call: --idempotency-key needs --async")
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
	client, err := cf.callerClient(zerolog.New(stderr).With().Timestamp().Logger())
	if err != nil {
		fmt.Fprintf(stderr, "tether call: %v\n", err)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	if ctx, err = tf.context(ctx); err != nil {
		fmt.Fprintf(stderr, "tether call: %v\n", err)
		return 2
	}
	c := &caller.HTTP{BaseURL: *brokerURL, Token: *token, Client: client}
	req := caller.Request{
		WorkspaceID:      *workspace,
		Endpoint:         fs.Arg(0),
		Payload:          payload,
		Timeout:          time.Duration(*timeout * float64(time.Second)),
		WaitForWorkspace: *waitFor,
		IdempotencyKey:   *key,
	}
	if *wait {
		req.WaitForWorkspace = req.Timeout
	}
	if *async {
		rec, err := c.Submit(ctx, req)
		if err != nil {
			printJSON(stdout, protocol.FailureFrom("", err, protocol.CodeInternalError), *compact)
			return 1
		}
		fmt.Fprintln(stdout, rec.CorrelationID)
		if rec.Status == store.Failed {
			fmt.Fprintf(stderr, "tether call: the call failed at once: %s: %s\n", rec.Response.Error, rec.Response.Message)
			return 1
		}
		return 0
	}
	resp := c.Call(ctx, req)
	printJSON(stdout, resp, *compact)
	if !resp.Success {
		return 1
	}
	return 0
}

// printJSON prints v indented, or on one line with compact.
func printJSON(w io.Writer, v any, compact bool) {
	var out []byte
	if compact {
		out, _ = json.Marshal(v)
	} else {
		out, _ = json.MarshalIndent(v, "", "  ")
	}
	fmt.Fprintln(w, string(out))
}
