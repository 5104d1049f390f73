package mcp

import (
	"fmt"
	"strings"

	"github.com/tetherdev/tether/dap"
)

// shownExceptionStack caps the stack of a throw in a stop's text; the
// structured result has it whole (as the adapter bounded it).
const shownExceptionStack = 1500

// renderException shows what a stop for an exception, panic or signal was
// about, right under the stop line: its type and message first (what a
// model acts on), then the stack of the throw.
func renderException(b *strings.Builder, ex *dap.ExceptionInfo) {
	fmt.Fprintf(b, "Exception %s", line(ex.Type, maxValue))
	if ex.Message != "" {
		fmt.Fprintf(b, ": %s", line(ex.Message, maxMessage))
	}
	switch ex.BreakMode {
	case "unhandled", "userUnhandled":
		b.WriteString(" (uncaught)")
	}
	b.WriteString("\n")
	if st := strings.TrimSpace(ex.Stack); st != "" {
		b.WriteString("Thrown at:\n")
		for l := range strings.Lines(block(st, shownExceptionStack)) {
			b.WriteString("  " + strings.TrimRight(l, "\n") + "\n")
		}
	}
}

// renderFilters lists an adapter's exception filters for debug_context.
func renderFilters(b *strings.Builder, filters []dap.ExceptionFilter) {
	if len(filters) == 0 {
		return
	}
	names := make([]string, len(filters))
	for i, f := range filters {
		names[i] = line(f.Filter, maxValue)
		if f.Default {
			names[i] += " (default)"
		}
	}
	fmt.Fprintf(b, "; exception_filters: %s", strings.Join(names, ", "))
}
