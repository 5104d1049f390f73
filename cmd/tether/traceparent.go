package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/tetherdev/tether/internal/tracing"
)

// traceFlags are a calling command's trace context: --traceparent, by
// default $TRACEPARENT (and $TRACESTATE), the convention for command-line
// tools run inside a traced job. The call continues it: the broker sends
// it on as the request's traceparent header.
type traceFlags struct {
	traceparent string
	tracestate  string
}

func (f *traceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.traceparent, "traceparent", "", "W3C traceparent of the caller's span, which the call's trace continues")
	f.tracestate = os.Getenv("TRACESTATE") // beside TRACEPARENT (flagenv.go)
}

// context returns ctx carrying the trace context; a traceparent that is
// not a valid W3C one is a usage error naming it.
func (f *traceFlags) context(ctx context.Context) (context.Context, error) {
	if f.traceparent == "" {
		return ctx, nil
	}
	out, ok := tracing.Extract(ctx, f.traceparent, f.tracestate)
	if !ok {
		return ctx, fmt.Errorf("--traceparent (or $TRACEPARENT) %q is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)", f.traceparent)
	}
	return out, nil
}
