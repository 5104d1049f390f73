package terminal

import (
	"encoding/json"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Execution modes of ExecRequest.Mode.
const (
	ModeSync  = "sync"
	ModeAsync = "async"
)

// Where a command ran, reported in ExecResult.Terminal and SessionInfo.
const (
	// TerminalVisible is the named terminal `tether attach` shows.
	TerminalVisible = "visible"
	// TerminalHidden is a fresh process nobody sees.
	TerminalHidden = "hidden"
)

// Session states reported in SessionInfo.Status and async ExecResults.
const (
	StatusRunning = "running"
	StatusExited  = "exited"
)

// ExecRequest is the payload of /api/terminal/execute.
type ExecRequest struct {
	// Command is a bash command line; it may span several lines.
	Command string `json:"command"`
	// Cwd is relative to the root or absolute inside it. Empty means the
	// visible terminal's current directory, or the root for hidden
	// commands.
	Cwd string `json:"cwd,omitempty"`
	// Env is merged over the bridge's environment for this command only.
	Env map[string]string `json:"env,omitempty"`
	// Mode is "sync" (the default) or "async".
	Mode string `json:"mode,omitempty"`
	// Timeout is in seconds. Sync default: Config.DefaultTimeout, and
	// never past the ctx deadline. Async default: none.
	Timeout float64 `json:"timeout,omitempty"`
	// Stdin, when set, is the command's whole input. Otherwise a sync
	// command reads /dev/null, so a prompt cannot hang it, and an async
	// command reads what Input sends.
	Stdin *string `json:"stdin,omitempty"`
	// Hidden runs the command as a fresh process instead of in the
	// visible terminal.
	Hidden bool `json:"hidden,omitempty"`
}

// ExecResult is the answer of /api/terminal/execute. A sync result
// encodes as {success, command, output, error, exit_code, duration_ms,
// timed_out, truncated, terminal, cwd, note}; an async one as
// {success, command, session_id, status, terminal, cwd, note}.
type ExecResult struct {
	// Success is ExitCode == 0 for sync; for async, that it started.
	Success bool   `json:"success"`
	Command string `json:"command"`
	// Output is what the command wrote, stdout and stderr together: as the
	// terminal showed them for visible commands; for hidden ones, read
	// from two pipes, so their relative order is approximate.
	Output string `json:"output"`
	// Error is the command's stderr alone for hidden commands (capped at
	// a quarter of OutputCap); for visible ones, whose streams a terminal
	// merges, a short description of the failure. Empty on success.
	Error      string `json:"error"`
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	// TimedOut is set when the timeout or a cancellation ended the
	// command; Output then holds what it wrote until then.
	TimedOut  bool   `json:"timed_out"`
	Truncated bool   `json:"truncated"`
	SessionID string `json:"session_id,omitempty"`
	Status    string `json:"status,omitempty"`
	// Terminal is "visible" or "hidden".
	Terminal string `json:"terminal"`
	// Cwd is the directory the command started in.
	Cwd string `json:"cwd"`
	// Note explains anything unusual, e.g. that the visible terminal was
	// busy and the command ran hidden, or that the terminal was reset.
	Note string `json:"note,omitempty"`
}

type asyncResultJSON struct {
	Success   bool   `json:"success"`
	Command   string `json:"command"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Terminal  string `json:"terminal"`
	Cwd       string `json:"cwd"`
	Note      string `json:"note,omitempty"`
}

// MarshalJSON writes the sync or the async shape, so an async result
// carries no exit_code a client could mistake for an exit.
func (r ExecResult) MarshalJSON() ([]byte, error) {
	if r.SessionID != "" {
		return json.Marshal(asyncResultJSON{
			Success: r.Success, Command: r.Command, SessionID: r.SessionID,
			Status: r.Status, Terminal: r.Terminal, Cwd: r.Cwd, Note: r.Note,
		})
	}
	// The sync shape is ExecResult's own fields but the async ones, which
	// omitempty leaves out once cleared (a type without the method, so
	// Marshal does not recurse).
	type syncShape ExecResult
	plain := syncShape(r)
	plain.Status = ""
	return json.Marshal(plain)
}

// The session requests and the output chunk are protocol's, shared with
// the sandbox's exec sessions so an agent learns one model.
type (
	// OutputRequest is the payload of /api/terminal/sessions/{id}/output.
	OutputRequest = protocol.SessionOutputRequest
	// OutputResult is a chunk of an async session's output.
	OutputResult = protocol.SessionOutput
	// InputRequest is the payload of /api/terminal/sessions/{id}/input.
	InputRequest = protocol.SessionInputRequest
	// SignalRequest is the payload of /api/terminal/sessions/{id}/signal.
	SignalRequest = protocol.SessionSignalRequest
)

// SessionInfo describes one async session in Sessions.
type SessionInfo struct {
	SessionID string     `json:"session_id"`
	Command   string     `json:"command"`
	Status    string     `json:"status"`
	ExitCode  *int       `json:"exit_code"`
	TimedOut  bool       `json:"timed_out"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Terminal  string     `json:"terminal"`
	Cwd       string     `json:"cwd"`
	// PID is the process (and process group) of a hidden session.
	PID int `json:"pid,omitempty"`
	// OutputBytes counts every byte the session has written.
	OutputBytes int64 `json:"output_bytes"`
}
