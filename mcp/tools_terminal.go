package mcp

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

type runArgs struct {
	Command   string            `json:"command" jsonschema:"bash command line; it may span several lines"`
	Cwd       string            `json:"cwd,omitempty" jsonschema:"working directory, relative to the workspace root; default: the terminal's current directory (the root for a sandbox)"`
	Env       map[string]string `json:"env,omitempty" jsonschema:"environment variables for this command only"`
	Stdin     string            `json:"stdin,omitempty" jsonschema:"the command's whole standard input; default none"`
	Async     bool              `json:"async,omitempty" jsonschema:"start the command and return at once with a session_id, for commands that run long or forever (servers, watchers); read their output with terminal_output"`
	TimeoutS  float64           `json:"timeout_s,omitempty" min:"0.1" max:"600" default:"30" jsonschema:"seconds the command may run before it is stopped (sync only); default 30"`
	SandboxID string            `json:"sandbox_id,omitempty" jsonschema:"run in this sandbox workspace (from sandbox_acquire) instead of the bridge's root"`
}

func (a runArgs) timeout() time.Duration { return seconds(a.TimeoutS) }

// seconds turns a timeout_s argument into a duration (the schema's default
// fills it in; zero only when a caller bypasses the schema).
func seconds(s float64) time.Duration {
	if s <= 0 {
		return defaultTimeout
	}
	return time.Duration(s * float64(time.Second))
}

type outputArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session_id terminal_run returned for an async command"`
	Offset    int64  `json:"offset,omitempty" min:"0" jsonschema:"byte offset to read from: 0 at first, then the next_offset of the previous read"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox workspace the session runs in, when terminal_run had sandbox_id"`
}

type inputArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session_id terminal_run returned for an async command"`
	Data      string `json:"data" jsonschema:"text to write to the command's standard input; include the newline a prompt waits for"`
	EOF       bool   `json:"eof,omitempty" jsonschema:"close the command's input after data"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox workspace the session runs in, when terminal_run had sandbox_id"`
}

type signalArgs struct {
	SessionID string `json:"session_id" jsonschema:"the session_id terminal_run returned for an async command"`
	Signal    string `json:"signal" jsonschema:"signal name: SIGINT (like Ctrl-C), SIGTERM, SIGKILL, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2"`
	SandboxID string `json:"sandbox_id,omitempty" jsonschema:"the sandbox workspace the session runs in, when terminal_run had sandbox_id"`
}

// syncSlack is how much longer than a sync command's own timeout its
// tether call may take: the terminal stops the command at its timeout and
// still answers with the output so far.
const syncSlack = 2 * time.Second

func addTerminalTools(s *Server) {
	add(s, spec{
		name:  "terminal_run",
		title: "Run a command",
		description: "Run a shell command in the workspace (the bridge's root, or a sandbox given sandbox_id) and return its exit code and output. " +
			"The person at the machine sees it in the bridge's terminal. A sync command (the default) returns when it ends or after timeout_s, stopped, with the output so far. " +
			"With async true it returns at once with a session_id: read its output with terminal_output, type into it with terminal_input, stop it with terminal_signal.",
		routes: []string{protocol.TerminalExecuteEndpoint, sandboxPattern(protocol.SandboxExecOp)}, destructive: true,
	}, runCommand)
	add(s, spec{
		name:  "terminal_output",
		title: "Read an async command's output",
		description: "Read what an async command (terminal_run with async) wrote from a byte offset on, and whether it still runs or its exit code. " +
			"Start at offset 0 and pass the next_offset of each read to the next one.",
		routes: sessionPatterns(protocol.SessionOutputOp), readOnly: true, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in outputArgs) (terminal.OutputResult, string, error) {
		var out terminal.OutputResult
		err := tc.call(ctx, sessionRoute(in.SandboxID, in.SessionID, protocol.SessionOutputOp), terminal.OutputRequest{Offset: in.Offset}, quickCall, &out)
		return out, renderOutput(in.SessionID, in.Offset, out), err
	})
	add(s, spec{
		name:        "terminal_input",
		title:       "Type into an async command",
		description: "Write text to the standard input of an async command (terminal_run with async), for a prompt or a REPL; eof closes its input. Returns the bytes written.",
		routes:      sessionPatterns(protocol.SessionInputOp), destructive: true,
	}, func(ctx context.Context, tc *toolCall, in inputArgs) (protocol.InputResult, string, error) {
		var out protocol.InputResult
		err := tc.call(ctx, sessionRoute(in.SandboxID, in.SessionID, protocol.SessionInputOp), terminal.InputRequest{Data: in.Data, EOF: in.EOF}, quickCall, &out)
		text := fmt.Sprintf("Wrote %d bytes to session %s", out.Bytes, line(in.SessionID, maxValue))
		if out.EOF {
			text += " and closed its input"
		}
		return out, text + ". Next: terminal_output to read what it answered.", err
	})
	add(s, spec{
		name:        "terminal_signal",
		title:       "Signal an async command",
		description: "Send a signal to an async command (terminal_run with async) and its children: SIGINT to interrupt it like Ctrl-C, SIGTERM or SIGKILL to end it.",
		routes:      sessionPatterns(protocol.SessionSignalOp), destructive: true,
	}, func(ctx context.Context, tc *toolCall, in signalArgs) (protocol.SignalResult, string, error) {
		var out protocol.SignalResult
		err := tc.call(ctx, sessionRoute(in.SandboxID, in.SessionID, protocol.SessionSignalOp), terminal.SignalRequest{Signal: in.Signal}, quickCall, &out)
		return out, fmt.Sprintf("Sent %s to session %s. Next: terminal_output to see how it ended.", line(out.Signal, maxValue), line(in.SessionID, maxValue)), err
	})
}

// sessionRoute is the route of op on an async session: the terminal's,
// or with sandboxID that sandbox workspace's.
func sessionRoute(sandboxID, id, op string) string {
	if sandboxID != "" {
		return sandboxRoute(sandboxID, protocol.SandboxSessionsOp+"/"+url.PathEscape(id)+"/"+op)
	}
	return protocol.TerminalSessionsEndpoint + "/" + url.PathEscape(id) + "/" + op
}

// sessionPatterns are the route patterns of sessionRoute, as
// capabilities lists them: the terminal's and the sandbox's.
func sessionPatterns(op string) []string {
	return []string{protocol.TerminalSessionsEndpoint + "/:id/" + op,
		sandboxPattern(protocol.SandboxSessionsOp + "/:session_id/" + op)}
}

func runCommand(ctx context.Context, tc *toolCall, in runArgs) (terminal.ExecResult, string, error) {
	var out terminal.ExecResult
	timeout := in.timeout()
	tc.wait("running " + line(in.Command, 80))
	if in.SandboxID != "" {
		payload := map[string]any{"command": in.Command, "cwd": in.Cwd, "env": in.Env, "stdin": in.Stdin, "timeout": timeout.Seconds()}
		callTimeout := timeout + syncSlack
		if in.Async {
			// As on the root: an async command runs until it ends or is
			// signalled, not for timeout_s.
			payload["mode"], payload["timeout"], callTimeout = terminal.ModeAsync, nil, quickCall
		}
		err := tc.call(ctx, sandboxRoute(in.SandboxID, protocol.SandboxExecOp), omitEmpty(payload), callTimeout, &out)
		text := renderExec(out)
		if out.SessionID != "" {
			text += fmt.Sprintf(" Pass sandbox_id %s with it to terminal_output, terminal_input and terminal_signal.", line(in.SandboxID, maxValue))
		}
		return out, text, err
	}
	req := terminal.ExecRequest{Command: in.Command, Cwd: in.Cwd, Env: in.Env}
	if in.Stdin != "" {
		req.Stdin = &in.Stdin
	}
	callTimeout := quickCall
	if in.Async {
		req.Mode = terminal.ModeAsync
	} else {
		req.Timeout = timeout.Seconds()
		callTimeout = timeout + syncSlack
	}
	err := tc.call(ctx, protocol.TerminalExecuteEndpoint, req, callTimeout, &out)
	return out, renderExec(out), err
}

// omitEmpty drops the zero values of a payload map, so a route of another
// version never sees a field it does not know unless the caller used it.
func omitEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		switch v := v.(type) {
		case string:
			if v == "" {
				delete(m, k)
			}
		case bool:
			if !v {
				delete(m, k)
			}
		case int:
			if v == 0 {
				delete(m, k)
			}
		case float64:
			if v == 0 {
				delete(m, k)
			}
		case map[string]string:
			if len(v) == 0 {
				delete(m, k)
			}
		case nil:
			delete(m, k)
		}
	}
	return m
}

func renderExec(r terminal.ExecResult) string {
	var b strings.Builder
	if r.SessionID != "" {
		fmt.Fprintf(&b, "Started session %s (%s", line(r.SessionID, maxValue), line(r.Status, maxValue))
		if r.Terminal != "" {
			fmt.Fprintf(&b, ", %s terminal", line(r.Terminal, maxValue))
		}
		fmt.Fprintf(&b, ").")
		if r.Note != "" {
			fmt.Fprintf(&b, "\nNote: %s", line(r.Note, maxMessage))
		}
		fmt.Fprintf(&b, "\nNext: terminal_output with session_id %s and offset 0.", line(r.SessionID, maxValue))
		return b.String()
	}
	switch {
	case r.TimedOut:
		fmt.Fprintf(&b, "Timed out after %s and was stopped", ms(r.DurationMS))
	default:
		fmt.Fprintf(&b, "Exit code %d after %s", r.ExitCode, ms(r.DurationMS))
	}
	if r.Cwd != "" {
		fmt.Fprintf(&b, " in %s", line(r.Cwd, maxValue))
	}
	if r.Terminal != "" {
		fmt.Fprintf(&b, " (%s terminal)", line(r.Terminal, maxValue))
	}
	b.WriteString(".")
	if r.Note != "" {
		fmt.Fprintf(&b, "\nNote: %s", line(r.Note, maxMessage))
	}
	if r.Truncated {
		b.WriteString("\nThe output was longer than the terminal keeps: its middle is cut.")
	}
	if r.Output == "" {
		b.WriteString("\n(no output)")
	} else {
		b.WriteString("\n")
		b.WriteString(block(r.Output, maxOutput))
	}
	if !r.Success && r.Error != "" && !strings.Contains(r.Output, r.Error) {
		b.WriteString("\nError: ")
		b.WriteString(block(r.Error, maxOutput/4))
	}
	if r.TimedOut {
		b.WriteString("\nNext: run it with a larger timeout_s, or with async true and read it with terminal_output.")
	}
	return b.String()
}

func renderOutput(id string, from int64, r terminal.OutputResult) string {
	var b strings.Builder
	if r.Missed > 0 {
		fmt.Fprintf(&b, "(%d bytes after offset %d were no longer kept)\n", r.Missed, from)
	}
	if r.Output == "" {
		b.WriteString("(no new output)")
	} else {
		b.WriteString(block(r.Output, maxOutput))
	}
	b.WriteString("\n")
	switch {
	case r.Running:
		fmt.Fprintf(&b, "Session %s is running.", line(id, maxValue))
	case r.EndedBy != "":
		fmt.Fprintf(&b, "Session %s was ended (%s): %s", line(id, maxValue), line(r.EndedBy, maxValue), line(r.Error, maxMessage))
	case r.ExitCode != nil && r.TimedOut:
		fmt.Fprintf(&b, "Session %s timed out and was stopped (exit code %d).", line(id, maxValue), *r.ExitCode)
	case r.ExitCode != nil:
		fmt.Fprintf(&b, "Session %s exited with code %d.", line(id, maxValue), *r.ExitCode)
	default:
		fmt.Fprintf(&b, "Session %s has ended.", line(id, maxValue))
	}
	if r.More {
		fmt.Fprintf(&b, " More output is ready: call terminal_output again with offset %d.", r.NextOffset)
	} else if r.Running {
		fmt.Fprintf(&b, " Next read: offset %d.", r.NextOffset)
	}
	return b.String()
}

func ms(d int64) string { return (time.Duration(d) * time.Millisecond).String() }
