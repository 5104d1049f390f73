package mcp

import (
	"fmt"
	"strings"

	"github.com/tetherdev/tether/protocol"
)

// toolError is a failed tool call. The SDK turns it into a tool result with
// isError set whose text is Error(): the tether code, its message, and one
// sentence on what to do next.
type toolError struct {
	Code    string
	Message string
	// Hint overrides the code's usual next step.
	Hint string
}

func (e *toolError) Error() string {
	var b strings.Builder
	b.WriteString("Error ")
	b.WriteString(e.Code)
	if e.Message != "" {
		// The first line is the error; lines after it are what the
		// workspace quotes (a debug adapter's output, a compiler's errors),
		// shown as lines, indented so none can pass for a Next: line.
		first, rest, _ := strings.Cut(e.Message, "\n")
		b.WriteString(": ")
		b.WriteString(line(first, maxMessage))
		if rest = strings.TrimRight(rest, "\n"); rest != "" {
			for l := range strings.Lines(block(rest, maxQuoted)) {
				b.WriteString("\n  ")
				b.WriteString(strings.TrimRight(l, "\n"))
			}
		}
	}
	if h := e.hint(); h != "" {
		b.WriteString("\nNext: ")
		b.WriteString(h)
	}
	return b.String()
}

func (e *toolError) hint() string {
	if e.Hint != "" {
		return e.Hint
	}
	return hintFor(e.Code)
}

// maxMessage caps an error message from the workspace in the text.
const maxMessage = 2000

// maxQuoted caps the lines an error quotes after its first (a failed debug
// start's adapter output is bounded to 4 KB at the source).
const maxQuoted = 5000

// failf is a tool error raised by the MCP layer itself.
func failf(code, hint, format string, args ...any) *toolError {
	return &toolError{Code: code, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// hints are the next steps, by tether error code. One sentence each: the
// reader is a model choosing its next tool call.
var hints = map[string]string{
	protocol.CodeWorkspaceOffline:        "nothing serves this workspace right now: start its bridge (tether bridge or tether up) or open it in the IDE, then call the tool again.",
	protocol.CodeWorkspaceDisconnected:   "the workspace's bridge went away during the call: wait until it reconnects, then check what the call did before repeating it.",
	protocol.CodeTimeout:                 "the call ran out of time: call again with a larger timeout_s, or run long commands with async true and read them with terminal_output.",
	protocol.CodeHandlerTimeout:          "the workspace took too long: call again with a larger timeout_s, or run long commands with async true.",
	protocol.CodeOverloaded:              "the workspace has too many calls in flight: wait a moment, then call again.",
	protocol.CodeBrokerShutdown:          "the broker is restarting: call again in a few seconds.",
	protocol.CodeBrokerUnreachable:       "tether cannot reach the broker: check that it runs and that --broker points at it.",
	protocol.CodeBusUnavailable:          "the broker lost its Redis connection: call again once it is back.",
	protocol.CodeCallerClosed:            "tether is shutting down: call again once it is back.",
	protocol.CodeUnauthorized:            "the caller token is missing, invalid or expired: get a new one (tether token --role caller).",
	protocol.CodeForbidden:               "the workspace does not allow this (read-only, or the route group is switched off): use the tools it lists.",
	protocol.CodePayloadTooLarge:         "the arguments are too large: send less (a smaller file, or a line range).",
	protocol.CodeInvalidRequest:          "fix the argument the message names and call again.",
	protocol.CodeInvalidPayload:          "fix the argument the message names and call again.",
	protocol.CodeUnknownRoute:            "this workspace's client does not serve that route (an IDE extension or an older bridge): use the other tools.",
	protocol.CodeInternalError:           "the workspace failed unexpectedly: call the tool again; if it fails the same way, report it.",
	protocol.CodeCancelled:               "the call was cancelled: call again if it is still needed.",
	protocol.CodeSessionNotFound:         "no such debug session: call debug_sessions to list them, or debug_start to begin one.",
	protocol.CodeSessionRunning:          "call debug_continue with wait or debug_pause.",
	protocol.CodeSessionEnded:            "the debug session has ended: call debug_output for what it printed, or debug_start to run it again.",
	protocol.CodeDebugAdapterUnavailable: "no debug adapter for that language runs here: call debug_context to see the adapters that can.",
	protocol.CodeWorkspaceNotFound:       "no such sandbox workspace (released, or evicted): call sandbox_acquire again.",
	protocol.CodeInvalidPath:             "give a path inside the workspace, relative to its root, with no '..' and no symlink leading out.",
	protocol.CodeInvalidRef:              "give a valid git ref, or an id of letters, digits, '_', '.' and '-'.",
	protocol.CodeRuntimeUnavailable:      "that sandbox runtime is not available here: acquire with runtime subprocess.",
	protocol.CodeNoMatch:                 "old does not occur in the file: call file_read and copy old from the file exactly, whitespace included.",
	protocol.CodeAmbiguousMatch:          "old occurs another number of times than expected: add the lines around it to old to make it unique, or set expected_count to replace them all.",
	protocol.CodeNotARepository:          "the workspace is in no git repository: use the file tools, or run git init with terminal_run.",
}

func hintFor(code string) string { return hints[code] }
