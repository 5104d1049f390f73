package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// Exit codes of `tether calls`, besides 2 for a usage error.
const (
	callsOK       = 0 // succeeded, or (status) not final yet
	callsFailed   = 1 // failed or cancelled, or the request was refused
	callsNotFinal = 3 // wait: the call was not final when the wait ended
)

// callsUsage is what `tether calls` prints without a verb, or with -h.
const callsUsage = `usage: tether calls status|wait|cancel [flags] CORRELATION_ID

Read or end an async call made with 'tether call --async' (or submitted to
POST /api/v1/workspaces/{id}/calls with "async": true). Each prints the
call's record as JSON: status, times, and the response once it has one.

  status   the record as it is now
  wait     wait for the outcome (up to --max) and print the record
  cancel   cancel it (tool_cancel reaches the client if it was delivered)
           and print the record: cancelled, or the outcome it already had

Exit status: 0 succeeded (status: also not final yet), 1 failed, cancelled
or refused (the error is printed as a ToolResponse), 3 wait ended before
the outcome, 2 usage. Run 'tether calls VERB -h' for a verb's flags.
`

// runCalls reads and ends async calls made with `tether call --async`: its
// verbs and exit statuses are callsUsage's.
func runCalls(args []string, stdout, stderr io.Writer) int {
	usage := func() { fmt.Fprint(stderr, callsUsage) }
	if len(args) == 0 {
		usage()
		return 2
	}
	verb := args[0]
	if verb == "-h" || verb == "-help" || verb == "--help" || verb == "help" {
		usage()
		return 0
	}
	fs := flag.NewFlagSet("calls "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokerURL := fs.String("broker", "http://127.0.0.1:8377", "broker URL")
	token := fs.String("token", "", "caller token")
	compact := fs.Bool("compact", false, "print the record on one line")
	var cf caFlags
	cf.register(fs)
	var tf traceFlags
	tf.register(fs)
	var max *time.Duration
	switch verb {
	case "status", "cancel":
	case "wait":
		max = fs.Duration("max", 11*time.Minute, "give up waiting after this long (exit 3); the longest call timeout is 10 minutes")
	default:
		usage()
		return 2
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tether calls %s [flags] CORRELATION_ID\n", verb)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return parseStatus(fs, err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	cid := fs.Arg(0)
	client, err := cf.callerClient(zerolog.New(stderr).With().Timestamp().Logger())
	if err != nil {
		fmt.Fprintf(stderr, "tether calls: %v\n", err)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	if ctx, err = tf.context(ctx); err != nil {
		fmt.Fprintf(stderr, "tether calls: %v\n", err)
		return 2
	}
	c := &caller.HTTP{BaseURL: *brokerURL, Token: *token, Client: client}
	var rec store.Record
	switch verb {
	case "status":
		rec, err = c.Status(ctx, cid)
	case "wait":
		rec, err = c.Wait(ctx, cid, *max)
	case "cancel":
		rec, err = c.Cancel(ctx, cid)
	}
	if err != nil {
		printJSON(stdout, protocol.FailureFrom(cid, err, protocol.CodeInternalError), *compact)
		return callsFailed
	}
	printJSON(stdout, rec, *compact)
	switch {
	case rec.Status == store.Succeeded:
		return callsOK
	case store.IsFinal(rec.Status):
		return callsFailed
	case verb == "wait":
		return callsNotFinal
	}
	return callsOK
}
