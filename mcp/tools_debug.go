package mcp

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tetherdev/tether/dap"
	"github.com/tetherdev/tether/protocol"
)

// lineBreakpoint is a breakpoint on a line given by its number or its text.
type lineBreakpoint struct {
	Line         int    `json:"line,omitempty" min:"1" jsonschema:"the line number; or give line_content"`
	LineContent  string `json:"line_content,omitempty" jsonschema:"the text of the line instead of its number, e.g. return sum; (models miscount lines; this does not): the line whose trimmed text equals it, else the lines containing it"`
	Occurrence   int    `json:"occurrence,omitempty" min:"1" jsonschema:"with line_content matching several lines: which one, 1 for the first"`
	Condition    string `json:"condition,omitempty" jsonschema:"stop only when this expression is true"`
	HitCondition string `json:"hit_condition,omitempty" jsonschema:"stop only on these hits, e.g. 3 or >5 (adapter syntax)"`
	LogMessage   string `json:"log_message,omitempty" jsonschema:"log this message ({expr} interpolated) instead of stopping; read it with debug_output"`
}

// fileBreakpoint is a lineBreakpoint in a file.
type fileBreakpoint struct {
	Path string `json:"path" jsonschema:"source file, relative to the workspace root"`
	lineBreakpoint
}

type startArgs struct {
	Config           map[string]any    `json:"config,omitempty" jsonschema:"a whole launch.json-style configuration (type, request, program, …)"`
	ConfigName       string            `json:"config_name,omitempty" jsonschema:"name of a configuration in the workspace's .vscode/launch.json (see debug_context)"`
	Language         string            `json:"language,omitempty" jsonschema:"with program: c, cpp, rust, python, go, javascript or typescript"`
	Program          string            `json:"program,omitempty" jsonschema:"the program to debug, relative to the workspace root: a built binary (c, cpp, rust), a script (python, javascript), a package directory (go)"`
	Args             []string          `json:"args,omitempty" jsonschema:"the program's arguments"`
	Cwd              string            `json:"cwd,omitempty" jsonschema:"the program's working directory; default the workspace root"`
	Env              map[string]string `json:"env,omitempty" jsonschema:"environment variables for the program"`
	StopOnEntry      bool              `json:"stop_on_entry,omitempty" jsonschema:"stop before the program's first line"`
	Breakpoints      []fileBreakpoint  `json:"breakpoints,omitempty" jsonschema:"breakpoints set before the program runs"`
	TimeoutS         float64           `json:"timeout_s,omitempty" min:"1" max:"600" default:"30" jsonschema:"seconds to wait for the adapter to start; default 30"`
	ExceptionFilters []string          `json:"exception_filters,omitempty" jsonschema:"which exceptions stop the program, by the adapter's filter names listed by debug_context (python: raised, uncaught, userUnhandled; javascript: all, uncaught; c/cpp: cpp_throw, cpp_catch; go: unrecovered-panic, runtime-fatal-throw); default the adapter's defaults (python stops on uncaught exceptions, go on panics, c on signals such as a segfault, javascript on none)"`
	CoreFile         string            `json:"core_file,omitempty" jsonschema:"a core dump of program to inspect post-mortem (c, cpp, rust with lldb-dap; go with delve): the session opens stopped at the crash, with its stack, locals and signal, and cannot run or step"`
}

func (a startArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

type setBreakpointsArgs struct {
	SessionID   string           `json:"session_id" jsonschema:"the debug session"`
	Path        string           `json:"path" jsonschema:"source file, relative to the workspace root"`
	Breakpoints []lineBreakpoint `json:"breakpoints" jsonschema:"the file's whole new set of breakpoints; empty clears it"`
}

type waitArgs struct {
	SessionID   string   `json:"session_id" jsonschema:"the debug session"`
	TimeoutS    float64  `json:"timeout_s,omitempty" min:"0.1" max:"600" default:"30" jsonschema:"seconds to wait for the session to stop; default 30"`
	Expressions []string `json:"expressions,omitempty" jsonschema:"expressions to evaluate at the stop"`
}

func (a waitArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

type continueArgs struct {
	SessionID   string   `json:"session_id" jsonschema:"the debug session"`
	Wait        bool     `json:"wait,omitempty" default:"true" jsonschema:"wait for the next stop and show it (default); false returns at once"`
	TimeoutS    float64  `json:"timeout_s,omitempty" min:"0.1" max:"600" default:"30" jsonschema:"seconds to wait for the next stop; default 30"`
	Expressions []string `json:"expressions,omitempty" jsonschema:"expressions to evaluate at the stop"`
}

func (a continueArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

type stepArgs struct {
	SessionID   string   `json:"session_id" jsonschema:"the debug session (stopped)"`
	Kind        string   `json:"kind,omitempty" enum:"over,into,out" default:"over" jsonschema:"over: the next line; into: into the call on this line; out: back to the caller"`
	TimeoutS    float64  `json:"timeout_s,omitempty" min:"0.1" max:"600" default:"30" jsonschema:"seconds to wait for the step to end; default 30"`
	Expressions []string `json:"expressions,omitempty" jsonschema:"expressions to evaluate where the step ends"`
}

func (a stepArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

type runToArgs struct {
	SessionID   string   `json:"session_id" jsonschema:"the debug session"`
	Path        string   `json:"path" jsonschema:"source file, relative to the workspace root"`
	Line        int      `json:"line,omitempty" min:"1" jsonschema:"the line to run to; or give line_content"`
	LineContent string   `json:"line_content,omitempty" jsonschema:"the text of the line to run to, instead of its number"`
	Occurrence  int      `json:"occurrence,omitempty" min:"1" jsonschema:"with line_content matching several lines: which one, 1 for the first"`
	TimeoutS    float64  `json:"timeout_s,omitempty" min:"0.1" max:"600" default:"30" jsonschema:"seconds to wait for the stop; default 30"`
	Expressions []string `json:"expressions,omitempty" jsonschema:"expressions to evaluate at the stop"`
}

func (a runToArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

type snapshotArgs struct {
	SessionID     string   `json:"session_id" jsonschema:"the debug session"`
	TimeoutS      float64  `json:"timeout_s,omitempty" min:"0.1" max:"600" default:"10" jsonschema:"seconds to wait for a running session to stop; default 10"`
	Expressions   []string `json:"expressions,omitempty" jsonschema:"expressions to evaluate in the frame whose locals are shown"`
	MaxFrames     int      `json:"max_frames,omitempty" min:"1" max:"200" jsonschema:"stack frames to fetch; default 20"`
	VariableDepth int      `json:"variable_depth,omitempty" min:"1" max:"5" jsonschema:"levels of struct fields and elements to expand; default 1"`
	FrameIndex    *int     `json:"frame_index,omitempty" min:"0" max:"199" jsonschema:"the stack frame (#N in the stack, 0 the top) whose locals to show and evaluate in; default the stop's: the top frame, or for an exception, signal, pause or core the first frame of the workspace's own code"`
}

func (a snapshotArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

type evaluateArgs struct {
	SessionID  string `json:"session_id" jsonschema:"the debug session (stopped)"`
	Expression string `json:"expression" jsonschema:"expression in the program's language"`
	FrameID    int    `json:"frame_id,omitempty" jsonschema:"frame id from the stack (structured result); default the frame whose locals the stop showed"`
	Context    string `json:"context,omitempty" enum:"watch,repl,hover" jsonschema:"watch (default), repl (may run statements) or hover"`
}

type debugOutputArgs struct {
	SessionID string `json:"session_id" jsonschema:"the debug session"`
	Offset    int64  `json:"offset,omitempty" min:"0" jsonschema:"byte offset to read from: 0 at first, then next_offset"`
}

type stopArgs struct {
	SessionID string `json:"session_id" jsonschema:"the debug session"`
	Terminate *bool  `json:"terminate_debuggee,omitempty" jsonschema:"end the program (default for launched programs) or leave it running (default for attached ones)"`
}

type contextArgs struct {
	File string `json:"file,omitempty" jsonschema:"the file ${file} stands for in launch.json"`
}

type noArgs struct{}

func addDebugTools(s *Server) {
	defer addDebugRestartWatchTools(s)
	add(s, spec{
		name:  "debug_context",
		title: "What can be debugged here",
		description: "List the debug adapters that really run on the workspace's machine (with the exception_filters each takes for debug_start), the launch configurations of .vscode/launch.json, and build and test commands inferred from its files. " +
			"Call it before debug_start.",
		routes: []string{protocol.DebugContextEndpoint}, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in contextArgs) (dap.DebugContext, string, error) {
		var out dap.DebugContext
		tc.wait("probing the debug adapters")
		err := tc.call(ctx, protocol.DebugContextEndpoint, dap.ContextRequest{File: in.File}, defaultTimeout, &out)
		return out, renderContext(out), err
	})
	add(s, spec{
		name:  "debug_start",
		title: "Start debugging",
		description: "Start a debug session: from a launch configuration (config), its name in launch.json (config_name), or language and program; with breakpoints by line or by the line's text (line_content). " +
			"With core_file and program it opens a core dump instead, stopped at the crash. " +
			"Returns the session_id and where each breakpoint went at once, while the program runs: then call debug_continue, which waits for the first stop and shows it. " +
			"With exception_filters the program stops where an exception is raised or uncaught; such a stop shows the exception's type, message and the stack of the throw. " +
			"A start that fails says why: the error holds what the adapter printed (a compiler's errors, a Python ImportError) and the next step.",
		routes: []string{protocol.DebugStartEndpoint}, destructive: true,
	}, startSession)
	add(s, spec{
		name:        "debug_set_breakpoints",
		title:       "Set a file's breakpoints",
		description: "Replace the breakpoints of one file in a session (by line, or by the line's text with line_content; conditions, hit counts, log messages). Returns each breakpoint's line and whether the adapter verified it.",
		routes:      []string{protocol.DebugBreakpointsEndpoint}, idempotent: true,
	}, setBreakpoints)
	add(s, spec{
		name:  "debug_continue",
		title: "Continue to the next stop",
		description: "Resume the program and wait (up to timeout_s) for the next stop: returns where and why it stopped, the stack, the locals and the source around the line, or the exit code if the program ended. " +
			"Right after debug_start it waits for the first stop.",
		routes: []string{protocol.DebugContinueEndpoint},
	}, continueSession)
	add(s, spec{
		name:        "debug_step",
		title:       "Step",
		description: "Step over the current line, into the call on it, or out to the caller, and return the new location with the locals and source (or the exit code).",
		routes:      []string{protocol.DebugStepOverEndpoint},
	}, step)
	add(s, spec{
		name:  "debug_run_to",
		title: "Run to a line",
		description: "Run until a line (by number, or by its text with line_content) and show the stop there: a temporary breakpoint, continue, then the file's breakpoints as they were. " +
			"If another breakpoint or the end comes first, that is what it returns.",
		routes: []string{protocol.DebugContinueEndpoint},
	}, runTo)
	add(s, spec{
		name:        "debug_pause",
		title:       "Pause",
		description: "Pause a running program and show where it is: stack, locals and source.",
		routes:      []string{protocol.DebugPauseEndpoint},
	}, func(ctx context.Context, tc *toolCall, in waitArgs) (StopView, string, error) {
		tc.s.debug.takeFirstStop(in.SessionID)
		v, err := control(ctx, tc, protocol.DebugPauseEndpoint, in.SessionID, in.timeout(), viewOpts{expressions: in.Expressions})
		return v, renderView(v, stoppedNext), err
	})
	add(s, spec{
		name:        "debug_snapshot",
		title:       "Show the stopped state",
		description: "Show a stopped session's state: where and why it stopped, the stack, the locals (expanded to variable_depth) and expressions, of the top frame or frame_index (an exception, signal, pause or core shows the first frame of the workspace's own code below a runtime's or library's). A running session is waited for, up to timeout_s.",
		routes:      []string{protocol.DebugSnapshotEndpoint}, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in snapshotArgs) (StopView, string, error) {
		tc.s.debug.takeFirstStop(in.SessionID)
		v, err := tc.view(ctx, in.SessionID, in.timeout(), viewOpts{expressions: in.Expressions, maxFrames: in.MaxFrames, depth: in.VariableDepth, frame: in.FrameIndex})
		return v, renderView(v, stoppedNext), err
	})
	add(s, spec{
		name:        "debug_evaluate",
		title:       "Evaluate an expression",
		description: "Evaluate an expression in a stopped session (in the frame whose locals the stop showed, or frame_id), e.g. a variable, a field, a call. Returns its value and type.",
		routes:      []string{protocol.DebugEvaluateEndpoint},
	}, func(ctx context.Context, tc *toolCall, in evaluateArgs) (dap.EvalResult, string, error) {
		var out dap.EvalResult
		err := tc.call(ctx, protocol.DebugEvaluateEndpoint, dap.EvaluateRequest{SessionID: in.SessionID, Expression: in.Expression, FrameID: in.FrameID, Context: in.Context}, quickCall, &out)
		text := fmt.Sprintf("%s = %s", line(in.Expression, maxValue), line(out.Result, maxOutput/4))
		if out.Type != "" {
			text += " (" + line(out.Type, maxValue) + ")"
		}
		if out.Error != "" {
			text = fmt.Sprintf("%s: error: %s", line(in.Expression, maxValue), line(out.Error, maxMessage))
		}
		return out, text, err
	})
	add(s, spec{
		name:        "debug_output",
		title:       "Read the program's output",
		description: "Read what the debugged program printed (stdout, stderr, log breakpoints) from a byte offset on; pass next_offset to the next read.",
		routes:      []string{protocol.DebugOutputEndpoint}, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in debugOutputArgs) (dap.OutputResult, string, error) {
		var out dap.OutputResult
		err := tc.call(ctx, protocol.DebugOutputEndpoint, dap.OutputRequest{SessionID: in.SessionID, Offset: in.Offset}, quickCall, &out)
		text := "(no output)"
		if out.Output != "" {
			text = block(out.Output, maxOutput)
		}
		return out, fmt.Sprintf("%s\nSession %s is %s. Next read: offset %d.", text, line(in.SessionID, maxValue), line(out.State, maxValue), out.NextOffset), err
	})
	add(s, spec{
		name:        "debug_sessions",
		title:       "List debug sessions",
		description: "List the workspace's debug sessions with their state (running, stopped, ended) and exit codes.",
		routes:      []string{protocol.DebugListEndpoint}, readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, _ noArgs) (dap.SessionList, string, error) {
		var out dap.SessionList
		err := tc.call(ctx, protocol.DebugListEndpoint, struct{}{}, quickCall, &out)
		return out, renderSessions(out), err
	})
	add(s, spec{
		name:        "debug_stop",
		title:       "Stop debugging",
		description: "End a debug session: the launched program is ended (an attached one detached), the adapter stopped.",
		routes:      []string{protocol.DebugStopEndpoint}, destructive: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in stopArgs) (dap.StopResult, string, error) {
		var out dap.StopResult
		err := tc.call(ctx, protocol.DebugStopEndpoint, dap.StopRequest{SessionID: in.SessionID, TerminateDebuggee: in.Terminate}, defaultTimeout, &out)
		if err == nil {
			tc.s.debug.forget(in.SessionID)
		}
		text := fmt.Sprintf("Session %s is %s", line(in.SessionID, maxValue), line(out.State, maxValue))
		if out.ExitCode != nil {
			text += fmt.Sprintf(" (exit code %d)", *out.ExitCode)
		}
		return out, text + ".", err
	})
}

// breakpointsPayload is a file's breakpoints as set-breakpoints and
// start-session take them.
func breakpointsPayload(bps []lineBreakpoint) []lineBreakpoint {
	if bps == nil {
		return []lineBreakpoint{}
	}
	return bps
}

func startSession(ctx context.Context, tc *toolCall, in startArgs) (dap.StartResult, string, error) {
	payload := omitEmpty(map[string]any{
		"config_name": in.ConfigName, "language": in.Language, "program": in.Program, "cwd": in.Cwd, "env": in.Env, "stop_on_entry": in.StopOnEntry,
		"core_file": in.CoreFile,
	})
	if in.Config != nil {
		payload["config"] = in.Config
	}
	if len(in.Args) > 0 {
		payload["args"] = in.Args
	}
	if in.ExceptionFilters != nil {
		payload["exception_filters"] = in.ExceptionFilters
	}
	return startAndShow(ctx, tc, payload, in.Breakpoints, in.timeout())
}

// startAndShow sends start-session with payload and the breakpoints (debug_start
// and debug_attach), registers the session, and renders the answer.
func startAndShow(ctx context.Context, tc *toolCall, payload map[string]any, bps []fileBreakpoint, timeout time.Duration) (dap.StartResult, string, error) {
	var out dap.StartResult
	files := map[string][]lineBreakpoint{}
	var order []string
	for _, b := range bps {
		if _, seen := files[b.Path]; !seen {
			order = append(order, b.Path)
		}
		files[b.Path] = append(files[b.Path], b.lineBreakpoint)
	}
	type fileSet struct {
		Path        string           `json:"path"`
		Breakpoints []lineBreakpoint `json:"breakpoints"`
	}
	sets := make([]fileSet, 0, len(order))
	for _, p := range order {
		sets = append(sets, fileSet{Path: p, Breakpoints: files[p]})
	}
	if len(sets) > 0 {
		payload["breakpoints"] = sets
	}
	tc.wait("starting the debug adapter")
	if err := tc.call(ctx, protocol.DebugStartEndpoint, payload, timeout, &out); err != nil {
		return out, "", err
	}
	// The first stop is still to be shown unless the session stands at
	// the entry it was asked to stop at: a program quick to reach its
	// breakpoint is stopped there already, and debug_continue, which this
	// answer points to, shows that stop instead of running past it.
	atEntry := out.State == dap.StateStopped && out.Stop != nil && out.Stop.Reason == "entry"
	tc.s.debug.started(out.SessionID, !atEntry)
	for _, p := range order {
		tc.s.debug.setBreakpoints(out.SessionID, p, files[p])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Started session %s with %s; it is %s", line(out.SessionID, maxValue), line(out.Adapter, maxValue), line(out.State, maxValue))
	if out.Stop != nil {
		fmt.Fprintf(&b, " (%s)", line(out.Stop.Reason, maxValue))
	}
	b.WriteString(".\n")
	renderBreakpoints(&b, out.Breakpoints, flatten(order, files))
	if _, core := payload["core_file"]; core {
		fmt.Fprintf(&b, "Next: debug_snapshot with session_id %s shows the crash (stack, locals, signal); debug_evaluate reads more. A core cannot run or step.", line(out.SessionID, maxValue))
		return out, b.String(), nil
	}
	fmt.Fprintf(&b, "Next: debug_continue with session_id %s waits for the next stop and shows it.", line(out.SessionID, maxValue))
	return out, b.String(), nil
}

// flatten lists the requested breakpoints in the order the adapter
// answers them: file by file.
func flatten(order []string, files map[string][]lineBreakpoint) []fileBreakpoint {
	var out []fileBreakpoint
	for _, p := range order {
		for _, b := range files[p] {
			out = append(out, fileBreakpoint{Path: p, lineBreakpoint: b})
		}
	}
	return out
}

func setBreakpoints(ctx context.Context, tc *toolCall, in setBreakpointsArgs) (dap.SetBreakpointsResult, string, error) {
	var out dap.SetBreakpointsResult
	payload := map[string]any{"session_id": in.SessionID, "path": in.Path, "breakpoints": breakpointsPayload(in.Breakpoints)}
	if err := tc.call(ctx, protocol.DebugBreakpointsEndpoint, payload, quickCall, &out); err != nil {
		return out, "", err
	}
	tc.s.debug.setBreakpoints(in.SessionID, in.Path, in.Breakpoints)
	var b strings.Builder
	if len(in.Breakpoints) == 0 {
		fmt.Fprintf(&b, "Cleared the breakpoints of %s.", line(in.Path, maxValue))
		return out, b.String(), nil
	}
	req := make([]fileBreakpoint, len(in.Breakpoints))
	for i, bp := range in.Breakpoints {
		req[i] = fileBreakpoint{Path: in.Path, lineBreakpoint: bp}
	}
	renderBreakpoints(&b, out.Breakpoints, req)
	return out, b.String(), nil
}

func renderBreakpoints(b *strings.Builder, got []dap.Breakpoint, asked []fileBreakpoint) {
	for i, bp := range got {
		file := bp.Path
		what := ""
		if i < len(asked) {
			if file == "" {
				file = asked[i].Path
			}
			if asked[i].LineContent != "" {
				what = " (line_content " + line(asked[i].LineContent, maxValue) + ")"
			}
		}
		state := "verified"
		if !bp.Verified {
			state = "NOT verified"
		}
		fmt.Fprintf(b, "Breakpoint %s:%d%s %s", line(file, maxValue), bp.Line, what, state)
		if bp.Message != "" {
			fmt.Fprintf(b, ": %s", line(bp.Message, maxMessage))
		}
		b.WriteString(".\n")
	}
}

// continueSession resumes a stopped session, or waits for a running one,
// and shows the next stop. Right after debug_start, the next stop is the
// first: if the program already reached it, that is what is shown.
func continueSession(ctx context.Context, tc *toolCall, in continueArgs) (StopView, string, error) {
	opts := viewOpts{expressions: in.Expressions}
	if tc.s.debug.takeFirstStop(in.SessionID) && in.Wait {
		v, err := tc.view(ctx, in.SessionID, in.timeout(), opts)
		return v, renderView(v, stoppedNext), err
	}
	if !in.Wait {
		var res dap.ControlResult
		err := tc.call(ctx, protocol.DebugContinueEndpoint, map[string]any{"session_id": in.SessionID, "wait": false}, quickCall, &res)
		v := StopView{SessionID: in.SessionID, State: res.State, ExitCode: res.ExitCode}
		return v, renderView(v, stoppedNext), err
	}
	v, err := control(ctx, tc, protocol.DebugContinueEndpoint, in.SessionID, in.timeout(), opts)
	return v, renderView(v, stoppedNext), err
}

// control sends an execution-control request that waits up to wait for
// the session to stop, and shows the outcome. A session that was already
// running (continue answers that at once) is waited for by a snapshot.
func control(ctx context.Context, tc *toolCall, endpoint, id string, wait time.Duration, o viewOpts) (StopView, error) {
	start := time.Now()
	var res dap.ControlResult
	tc.wait("waiting for the session to stop")
	payload := map[string]any{"session_id": id, "wait": true, "wait_timeout_ms": max(int(wait/time.Millisecond), 1)}
	if err := tc.call(ctx, endpoint, payload, wait+syncSlack, &res); err != nil {
		return StopView{SessionID: id}, err
	}
	switch res.State {
	case dap.StateEnded:
		return tc.ended(ctx, id, res.ExitCode)
	case dap.StateStopped:
		return tc.view(ctx, id, 0, o)
	}
	if left := wait - time.Since(start); left > minCallTimeout {
		return tc.view(ctx, id, left, o)
	}
	return StopView{SessionID: id, State: res.State, Note: fmt.Sprintf("still running after %s", wait.Round(time.Millisecond))}, nil
}

func step(ctx context.Context, tc *toolCall, in stepArgs) (StopView, string, error) {
	tc.s.debug.takeFirstStop(in.SessionID)
	endpoint := map[string]string{"over": protocol.DebugStepOverEndpoint, "into": protocol.DebugStepIntoEndpoint, "out": protocol.DebugStepOutEndpoint}[in.Kind]
	if endpoint == "" {
		endpoint = protocol.DebugStepOverEndpoint
	}
	v, err := control(ctx, tc, endpoint, in.SessionID, in.timeout(), viewOpts{expressions: in.Expressions})
	return v, renderView(v, stoppedNext), err
}

// runTo adds a temporary breakpoint at the target, continues to the next
// stop, and puts the file's breakpoints back as the tools last set them.
func runTo(ctx context.Context, tc *toolCall, in runToArgs) (StopView, string, error) {
	if (in.Line > 0) == (in.LineContent != "") {
		return StopView{SessionID: in.SessionID}, "", failf(protocol.CodeInvalidRequest, "give debug_run_to line or line_content.", "debug_run_to needs exactly one of line and line_content")
	}
	target := lineBreakpoint{Line: in.Line, LineContent: in.LineContent, Occurrence: in.Occurrence}
	tc.s.debug.takeFirstStop(in.SessionID) // it runs to the line, past any earlier stop
	kept := tc.s.debug.breakpoints(in.SessionID, in.Path)
	set := append(slices.Clone(kept), target)
	var placed dap.SetBreakpointsResult
	payload := map[string]any{"session_id": in.SessionID, "path": in.Path, "breakpoints": set}
	if err := tc.call(ctx, protocol.DebugBreakpointsEndpoint, payload, quickCall, &placed); err != nil {
		return StopView{SessionID: in.SessionID}, "", err
	}
	at := 0
	if n := len(placed.Breakpoints); n == len(set) {
		at = placed.Breakpoints[n-1].Line
	}
	v, err := control(ctx, tc, protocol.DebugContinueEndpoint, in.SessionID, in.timeout(), viewOpts{expressions: in.Expressions})
	// Put the set back even when the client gave up meanwhile: a
	// temporary breakpoint left behind would stop the program later. It
	// is one quick request; restoreWait bounds how far past the tool's
	// deadline it may take.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreWait)
	defer cancel()
	restore := tc.call(rctx, protocol.DebugBreakpointsEndpoint, map[string]any{"session_id": in.SessionID, "path": in.Path, "breakpoints": breakpointsPayload(kept)}, restoreWait, nil)
	if err != nil {
		return v, "", err
	}
	if restore != nil && v.State != dap.StateEnded {
		v.Note = "the temporary breakpoint could not be removed: call debug_set_breakpoints for " + in.Path
	}
	if v.State == dap.StateStopped && at > 0 && v.Snapshot != nil && len(v.Snapshot.Frames) > 0 && v.Snapshot.Frames[0].Line != at {
		v.Note = fmt.Sprintf("Stopped before reaching line %d.", at)
	}
	return v, renderView(v, stoppedNext), nil
}

// restoreWait bounds putting a file's breakpoints back after debug_run_to.
const restoreWait = time.Second

func renderContext(c dap.DebugContext) string {
	var b strings.Builder
	b.WriteString("Debug adapters that run here:")
	if len(c.DebugAdapters) == 0 {
		b.WriteString(" none")
	}
	for _, a := range c.DebugAdapters {
		fmt.Fprintf(&b, "\n  %s (%s)", line(a.Name, maxValue), line(strings.Join(a.Types, ", "), maxValue))
		renderFilters(&b, a.ExceptionFilters)
	}
	if len(c.LaunchConfigs) > 0 {
		b.WriteString("\nLaunch configurations (config_name):")
		for _, lc := range c.LaunchConfigs {
			fmt.Fprintf(&b, "\n  %s (type %s)", line(lc.Name(), maxValue), line(lc.Type(), maxValue))
		}
	}
	if c.LaunchError != "" {
		fmt.Fprintf(&b, "\nlaunch.json cannot be read: %s", line(c.LaunchError, maxMessage))
	}
	if len(c.InferredCommands) > 0 {
		b.WriteString("\nBuild and test commands (run them with terminal_run):")
		for _, ic := range c.InferredCommands {
			fmt.Fprintf(&b, "\n  %s: %s", line(ic.Kind, maxValue), line(ic.Command, maxValue))
		}
	}
	return b.String()
}

func renderSessions(l dap.SessionList) string {
	if len(l.Sessions) == 0 {
		return "No debug sessions."
	}
	var b strings.Builder
	for _, s := range l.Sessions {
		fmt.Fprintf(&b, "%s  %s  %s", line(s.SessionID, maxValue), line(s.Adapter, maxValue), line(s.State, maxValue))
		if s.Stop != nil && s.State == dap.StateStopped {
			fmt.Fprintf(&b, " (%s)", line(s.Stop.Reason, maxValue))
		}
		if s.ExitCode != nil {
			fmt.Fprintf(&b, " exit code %d", *s.ExitCode)
		}
		if s.Name != "" {
			fmt.Fprintf(&b, "  %s", line(s.Name, maxValue))
		}
		b.WriteString("\n")
	}
	return b.String()
}
