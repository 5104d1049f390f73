package dap

import (
	"encoding/json"
	"time"
)

// Session states.
const (
	StateInitializing = "initializing"
	StateRunning      = "running"
	StateStopped      = "stopped"
	StateEnded        = "ended"
)

// SourceBreakpoint is a line breakpoint as requested. A non-empty LogMessage
// makes it a logpoint ({expr} interpolated), which logs instead of stopping.
//
// Give exactly one of Line and LineContent. LineContent is the text of the
// line (models miscount lines): the line whose trimmed text equals it, else
// the lines containing it, in the breakpoint's file (which must lie inside
// the workspace root). No match, or several without Occurrence (1-based)
// choosing one, is an invalid_payload error naming the text and the file
// and listing the candidate lines. The answer's Breakpoint reports the line
// it resolved to.
type SourceBreakpoint struct {
	Line         int    `json:"line,omitempty"`
	LineContent  string `json:"line_content,omitempty"`
	Occurrence   int    `json:"occurrence,omitempty"`
	Column       int    `json:"column,omitempty"`
	Condition    string `json:"condition,omitempty"`
	HitCondition string `json:"hit_condition,omitempty"`
	LogMessage   string `json:"log_message,omitempty"`
}

// FunctionBreakpoint breaks on entry to a function by name.
type FunctionBreakpoint struct {
	Name         string `json:"name"`
	Condition    string `json:"condition,omitempty"`
	HitCondition string `json:"hit_condition,omitempty"`
}

// FileBreakpoints is the whole breakpoint set of one file; DAP replaces a
// file's set on every request, and so does tether.
type FileBreakpoints struct {
	Path        string             `json:"path"`
	Breakpoints []SourceBreakpoint `json:"breakpoints"`
}

// Breakpoint is a breakpoint as the adapter reports it.
type Breakpoint struct {
	ID       int    `json:"id,omitempty"`
	Verified bool   `json:"verified"`
	Line     int    `json:"line,omitempty"`
	Path     string `json:"path,omitempty"`
	Function string `json:"function,omitempty"`
	Message  string `json:"message,omitempty"`
}

// StartRequest is the payload of /api/debug/start-session. Give one of
// Config (a full launch.json-style configuration), ConfigName (from
// .vscode/launch.json) or Language with Program (or Pid / Connect to attach).
type StartRequest struct {
	Config     map[string]any `json:"config,omitempty"`
	ConfigName string         `json:"config_name,omitempty"`

	Language    string            `json:"language,omitempty"`
	Program     string            `json:"program,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Cwd         string            `json:"cwd,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	StopOnEntry bool              `json:"stop_on_entry,omitempty"`

	// Request is "launch" (default) or "attach"; attach takes Pid (lldb-dap,
	// delve) or Connect (a debugpy listener).
	Request string   `json:"request,omitempty"`
	Pid     int      `json:"pid,omitempty"`
	Connect *Address `json:"connect,omitempty"`

	// File resolves ${file} in launch.json.
	File string `json:"file,omitempty"`

	// Breakpoints set before the program runs.
	Breakpoints         []FileBreakpoints    `json:"breakpoints,omitempty"`
	FunctionBreakpoints []FunctionBreakpoint `json:"function_breakpoints,omitempty"`
	// ExceptionFilters replaces the adapter's default exception filters
	// (debugpy: uncaught) when non-nil.
	ExceptionFilters []string `json:"exception_filters,omitempty"`

	// Remote attach (attach.go). PathMappings say where the sources under
	// the bridge's root are on the debuggee's side: breakpoints go out
	// mapped, stack frames and breakpoint paths come back as local paths.
	PathMappings []PathMapping `json:"path_mappings,omitempty"`
	// CoreFile, with Program, opens a core dump post-mortem (lldb-dap for
	// C, C++ and Rust, delve for Go): the session is stopped at the crash
	// and cannot run (session_postmortem.go).
	CoreFile string `json:"core_file,omitempty"`
}

// Address is a host and port. An attach connects only to an address the
// bridge's --debug-attach-allow admits (loopback by default).
type Address struct {
	Host string `json:"host,omitempty"`
	Port int    `json:"port"`
}

// StartResult is the answer of /api/debug/start-session.
type StartResult struct {
	SessionID    string          `json:"session_id"`
	Adapter      string          `json:"adapter"`
	State        string          `json:"state"`
	Capabilities json.RawMessage `json:"capabilities"`
	Stop         *StopInfo       `json:"stop,omitempty"`
	Breakpoints  []Breakpoint    `json:"breakpoints,omitempty"`
}

// SetBreakpointsRequest is the payload of /api/debug/set-breakpoints. With
// Path, Breakpoints replaces that file's set (empty clears it). Functions,
// when non-nil, replaces the function breakpoints; ExceptionFilters, when
// non-nil, the exception filters.
type SetBreakpointsRequest struct {
	SessionID        string               `json:"session_id"`
	Path             string               `json:"path,omitempty"`
	Breakpoints      []SourceBreakpoint   `json:"breakpoints"`
	Functions        []FunctionBreakpoint `json:"function_breakpoints,omitempty"`
	ExceptionFilters []string             `json:"exception_filters,omitempty"`
}

// SetBreakpointsResult gives the adapter's answer, in request order.
type SetBreakpointsResult struct {
	Breakpoints         []Breakpoint `json:"breakpoints"`
	FunctionBreakpoints []Breakpoint `json:"function_breakpoints,omitempty"`
}

// ControlRequest is the payload of continue, step-over, step-into, step-out
// and pause. Wait defaults to true for steps and pause, false for continue.
type ControlRequest struct {
	SessionID     string `json:"session_id"`
	ThreadID      int    `json:"thread_id,omitempty"`
	Wait          *bool  `json:"wait,omitempty"`
	WaitTimeoutMS int    `json:"wait_timeout_ms,omitempty"`
}

// ControlResult is the state after an execution-control request; with wait,
// the stop and its location (or the exit).
type ControlResult struct {
	SessionID string    `json:"session_id"`
	State     string    `json:"state"`
	Stop      *StopInfo `json:"stop,omitempty"`
	Location  *Frame    `json:"location,omitempty"`
	ExitCode  *int      `json:"exit_code,omitempty"`
}

// StopInfo is why and where a session stopped.
type StopInfo struct {
	Reason            string `json:"reason"`
	Description       string `json:"description,omitempty"`
	Text              string `json:"text,omitempty"`
	ThreadID          int    `json:"thread_id"`
	AllThreadsStopped bool   `json:"all_threads_stopped,omitempty"`
	HitBreakpointIDs  []int  `json:"hit_breakpoint_ids,omitempty"`
	// Exception is what was thrown, for a stop on an exception, a panic or
	// a signal (exception.go).
	Exception *ExceptionInfo `json:"exception,omitempty"`
	// Signal is the signal a post-mortem session's core was dumped on
	// (SIGSEGV, SIGABRT, …; none for gcore of a running process), read
	// from the core file.
	Signal string `json:"signal,omitempty"`
}

// SnapshotRequest is the payload of /api/debug/snapshot.
type SnapshotRequest struct {
	SessionID     string   `json:"session_id"`
	WaitTimeoutMS int      `json:"wait_timeout_ms,omitempty"` // default 5000
	Expressions   []string `json:"expressions,omitempty"`
	MaxFrames     int      `json:"max_frames,omitempty"`     // default 20
	VariableDepth int      `json:"variable_depth,omitempty"` // default 1
	ThreadID      int      `json:"thread_id,omitempty"`
	// FrameIndex picks the frame (an index into the stack, 0 the top)
	// whose scopes, locals and expressions the snapshot gives; without it,
	// the stop's own (Snapshot.FrameIndex).
	FrameIndex *int `json:"frame_index,omitempty"`
}

// Snapshot is a stopped session's state.
type Snapshot struct {
	SessionID string    `json:"session_id"`
	State     string    `json:"state"`
	Stop      *StopInfo `json:"stop"`
	ThreadID  int       `json:"thread_id"`
	Frames    []Frame   `json:"frames"`
	// FrameIndex is the index in Frames of the frame Scopes, Locals and
	// Expressions are of: the top frame (0), or, for an exception, a
	// signal, a pause or a core whose top frames are outside the
	// workspace (a runtime's or library's), the first frame of the
	// workspace's own code (focus.go); or the request's FrameIndex.
	FrameIndex  int          `json:"frame_index"`
	Scopes      []Scope      `json:"scopes"`
	Locals      []Variable   `json:"locals"`
	Expressions []EvalResult `json:"expressions,omitempty"`
}

// Frame is one stack frame.
type Frame struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Path   string `json:"path,omitempty"`
	Source string `json:"source,omitempty"`
	Line   int    `json:"line"`
	Column int    `json:"column,omitempty"`
}

// Scope is one scope of the top frame with its variables.
type Scope struct {
	Name      string     `json:"name"`
	Expensive bool       `json:"expensive,omitempty"`
	Variables []Variable `json:"variables,omitempty"`
}

// Variable is a variable, its children expanded to the requested depth.
type Variable struct {
	Name     string     `json:"name"`
	Value    string     `json:"value"`
	Type     string     `json:"type,omitempty"`
	Ref      int        `json:"variables_reference,omitempty"`
	Children []Variable `json:"children,omitempty"`
}

// EvaluateRequest is the payload of /api/debug/evaluate. FrameID 0 means
// the stopped thread's frame a snapshot's locals are of (its top frame,
// or the workspace's own below a runtime's: Snapshot.FrameIndex);
// Context defaults to "watch".
type EvaluateRequest struct {
	SessionID  string `json:"session_id"`
	Expression string `json:"expression"`
	FrameID    int    `json:"frame_id,omitempty"`
	Context    string `json:"context,omitempty"`
}

// EvalResult is one evaluated expression.
type EvalResult struct {
	Expression string `json:"expression"`
	Result     string `json:"result,omitempty"`
	Type       string `json:"type,omitempty"`
	Ref        int    `json:"variables_reference,omitempty"`
	Error      string `json:"error,omitempty"`
}

// SessionRequest names a session (list-sessions ignores it).
type SessionRequest struct {
	SessionID string `json:"session_id"`
}

// StopRequest is the payload of /api/debug/stop-session. TerminateDebuggee
// defaults to true for launched programs and false for attached ones (which
// are detached and keep running).
type StopRequest struct {
	SessionID         string `json:"session_id"`
	TerminateDebuggee *bool  `json:"terminate_debuggee,omitempty"`
}

// StopResult is the answer of /api/debug/stop-session.
type StopResult struct {
	SessionID string `json:"session_id"`
	State     string `json:"state"`
	ExitCode  *int   `json:"exit_code,omitempty"`
}

// SessionInfo is one entry of /api/debug/list-sessions.
type SessionInfo struct {
	SessionID string    `json:"session_id"`
	Adapter   string    `json:"adapter"`
	Name      string    `json:"name,omitempty"`
	Request   string    `json:"request"`
	State     string    `json:"state"`
	Stop      *StopInfo `json:"stop,omitempty"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	EndReason string    `json:"end_reason,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// SessionList is the answer of /api/debug/list-sessions.
type SessionList struct {
	Sessions []SessionInfo `json:"sessions"`
}

// OutputRequest is the payload of /api/debug/output.
type OutputRequest struct {
	SessionID string `json:"session_id"`
	Offset    int64  `json:"offset"`
}

// OutputResult is the debuggee's output (stdout, stderr and the adapter's
// console lines such as logpoints) from Offset on.
type OutputResult struct {
	SessionID  string `json:"session_id"`
	Output     string `json:"output"`
	Offset     int64  `json:"offset"`      // where Output starts (> requested if dropped)
	NextOffset int64  `json:"next_offset"` // pass as offset next time
	State      string `json:"state"`
}

// ContextRequest is the payload of /api/workspace/debug-context.
type ContextRequest struct {
	// File resolves ${file} in launch.json.
	File string `json:"file,omitempty"`
}

// DebugContext is what a workspace offers for debugging.
type DebugContext struct {
	LaunchConfigs []LaunchConfig `json:"launch_configs"`
	// LaunchError is set when launch.json exists but cannot be read.
	LaunchError      string            `json:"launch_error,omitempty"`
	DebugAdapters    []AdapterInfo     `json:"debug_adapters"`
	NativeDebuggers  map[string]string `json:"native_debuggers"`
	InferredCommands []InferredCommand `json:"inferred_commands"`
}

// InferredCommand is a build or test command suggested by the files present.
type InferredCommand struct {
	Kind    string `json:"kind"` // build, test or run
	Command string `json:"command"`
	Reason  string `json:"reason"` // the file that suggested it
}

// AdapterInfo describes an adapter that was found and answered initialize.
type AdapterInfo struct {
	Name  string   `json:"name"`
	Types []string `json:"types"`
	Path  string   `json:"path"`
	// Implementation says which program serves the adapter when there is a
	// choice (node: builtin-cdp, tether's own, or js-debug).
	Implementation string `json:"implementation,omitempty"`
	Version        string `json:"version,omitempty"`
	// ExceptionFilters are the adapter's ways to stop on exceptions, for
	// start-session's exception_filters (the Default ones apply when it is
	// not given).
	ExceptionFilters []ExceptionFilter `json:"exception_filters"`
}

// LaunchConfig is one configuration of launch.json, variables resolved. It
// is kept as a map because every adapter has its own keys.
type LaunchConfig map[string]any

// Name is the configuration's "name".
func (c LaunchConfig) Name() string { s, _ := c["name"].(string); return s }

// Type is the configuration's "type".
func (c LaunchConfig) Type() string { s, _ := c["type"].(string); return s }

// Failures and exceptions (issue 32, parts 1 and 5).

// ExceptionInfo is what a stop for an exception, a panic or a signal was
// about: the exception's type (ZeroDivisionError, panic, signal SIGSEGV,
// TypeError), its message, the adapter's break mode (always, unhandled,
// userUnhandled) and, where the adapter gives it, the stack of the throw
// as text (bounded).
type ExceptionInfo struct {
	Type      string `json:"type"`
	Message   string `json:"message,omitempty"`
	BreakMode string `json:"break_mode,omitempty"`
	Stack     string `json:"stack,omitempty"`
}

// ExceptionFilter is one way an adapter can be asked to stop on exceptions
// (start-session's and set-breakpoints' exception_filters take Filter).
type ExceptionFilter struct {
	Filter      string `json:"filter"`
	Label       string `json:"label,omitempty"`
	Description string `json:"description,omitempty"`
	// Default filters are the ones used when exception_filters is not given.
	Default bool `json:"default,omitempty"`
}

// Restart and watchpoints (session_restart.go, session_watchpoints.go).

// RestartRequest is the payload of /api/debug/restart.
type RestartRequest struct {
	SessionID     string `json:"session_id"`
	WaitTimeoutMS int    `json:"wait_timeout_ms,omitempty"` // default 10000
}

// RestartResult is the state after a restart: like continue with wait, the
// first stop and its location (or the exit), with the session id unchanged.
// Method is "restart" (the adapter's own restart request) or "relaunch"
// (the program ended and launched again, the breakpoints sent again).
type RestartResult struct {
	ControlResult
	Method      string       `json:"method"`
	Breakpoints []Breakpoint `json:"breakpoints,omitempty"`
}

// Watchpoint is a data breakpoint as requested: give exactly one of
// Expression (an lvalue in the stopped frame a snapshot shows, e.g.
// counter or p->next) and
// Address (e.g. 0x7ffd1234, with Size bytes, default 4). Access is write
// (default), read or readWrite.
type Watchpoint struct {
	Expression   string `json:"expression,omitempty"`
	Address      string `json:"address,omitempty"`
	Size         int    `json:"size,omitempty"`
	Access       string `json:"access,omitempty"`
	Condition    string `json:"condition,omitempty"`
	HitCondition string `json:"hit_condition,omitempty"`
}

// WatchpointsRequest is the payload of /api/debug/set-watchpoints: the
// session's whole new set of watchpoints (empty clears it).
type WatchpointsRequest struct {
	SessionID   string       `json:"session_id"`
	Watchpoints []Watchpoint `json:"watchpoints"`
}

// WatchpointResult is one watchpoint as the adapter placed it.
type WatchpointResult struct {
	ID          int    `json:"id,omitempty"`
	Verified    bool   `json:"verified"`
	Expression  string `json:"expression,omitempty"`
	Address     string `json:"address,omitempty"`
	Access      string `json:"access"`
	Description string `json:"description,omitempty"` // the adapter's, e.g. "4 bytes at 0x4010"
	Message     string `json:"message,omitempty"`
}

// WatchpointsResult gives the adapter's answer, in request order.
type WatchpointsResult struct {
	Watchpoints []WatchpointResult `json:"watchpoints"`
}

// PathMapping says where the sources under LocalRoot (in the bridge's
// root) are on the debuggee's side (RemoteRoot), for a program that was
// built or runs elsewhere: in a container, on another machine, from
// another checkout.
type PathMapping struct {
	LocalRoot  string `json:"local_root"`
	RemoteRoot string `json:"remote_root"`
}
