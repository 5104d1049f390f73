package protocol

// Error codes sent in ToolResponse.Error. They are snake_case on the wire;
// the human text goes in ToolResponse.Message. Every code tether emits is
// listed here and nowhere else.
const (
	// Broker outcomes (docs/design.md, "Guaranteed response").
	CodeWorkspaceOffline      = "workspace_offline"
	CodeTimeout               = "timeout"
	CodeWorkspaceDisconnected = "workspace_disconnected"
	CodeBrokerShutdown        = "broker_shutdown"
	CodeOverloaded            = "overloaded"
	CodeInvalidRequest        = "invalid_request"
	CodeUnauthorized          = "unauthorized"
	CodeForbidden             = "forbidden"
	CodePayloadTooLarge       = "payload_too_large"
	// Async calls (docs/async-calls.md).
	CodeCallNotFound = "call_not_found" // no record of that correlation id (never made, or past retention)
	CodeConflict     = "conflict"       // an idempotency key reused with another body, or a correlation id already taken

	// Bridge outcomes.
	CodeUnknownRoute   = "unknown_route"
	CodeInternalError  = "internal_error"
	CodeHandlerTimeout = "handler_timeout"
	CodeInvalidPayload = "invalid_payload"
	CodeCancelled      = "cancelled"

	// Caller-side outcomes.
	CodeCallerClosed      = "caller_closed"      // the caller was closed while the call waited
	CodeBusUnavailable    = "bus_unavailable"    // the call could not be published (Redis down)
	CodeBrokerUnreachable = "broker_unreachable" // an HTTP caller could not reach the broker

	// Domain outcomes of bridge routes.
	CodeSessionNotFound         = "session_not_found"
	CodeWorkspaceNotFound       = "workspace_not_found" // a sandbox workspace that does not exist (or was evicted)
	CodeDebugAdapterUnavailable = "debug_adapter_unavailable"
	CodeSessionRunning          = "session_running"
	CodeSessionEnded            = "session_ended"
	CodeInvalidPath             = "invalid_path"
	CodeInvalidRef              = "invalid_ref"
	CodeRuntimeUnavailable      = "runtime_unavailable"
	CodeRuntimeStopped          = "runtime_stopped"  // the sandbox's container exited or was killed while the command ran; the message has its exit status and last log lines
	CodeNoMatch                 = "no_match"         // str-replace: the old text does not occur
	CodeAmbiguousMatch          = "ambiguous_match"  // str-replace: it occurs another number of times than expected_count
	CodeNotARepository          = "not_a_repository" // a git route on a directory that is in no git repository
	CodeUnsupported             = "unsupported"      // the session's adapter (or a post-mortem session) cannot do this; the message names what can
)

// Error is a coded failure. Route handlers and the broker return it so the
// code reaches the caller unchanged; errors.As finds it through wrapping.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf is shorthand for a *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: sprintf(format, args...)}
}
