package protocol

// The requests and results of async sessions: the terminal's
// (TerminalSessionsEndpoint/{session_id}/…) and the sandbox's
// (SandboxWorkspacesEndpoint/{workspace_id}/sessions/{session_id}/…).

// SessionOutputRequest is the payload of a session's output route
// (TerminalSessionsEndpoint/{session_id}/output, and the sandbox's).
type SessionOutputRequest struct {
	Offset int64 `json:"offset,omitempty"`
}

// SessionOutput is a chunk of an async session's output.
type SessionOutput struct {
	Output string `json:"output"`
	// Offset is where Output starts in the session's byte stream. It is
	// past the requested offset when the ring no longer held those bytes.
	Offset int64 `json:"offset"`
	// NextOffset is the offset to ask for next.
	NextOffset int64 `json:"next_offset"`
	// Missed is Offset minus the requested offset: bytes lost to the ring.
	Missed int64 `json:"missed"`
	// More is set when bytes past NextOffset are already available (the
	// chunk was capped); poll again at once.
	More    bool `json:"more"`
	Running bool `json:"running"`
	// ExitCode is null while the session runs.
	ExitCode *int `json:"exit_code"`
	TimedOut bool `json:"timed_out"`
	// EndedBy is set when something else than the command ended it: an
	// error code such as "runtime_stopped" (a sandbox session whose
	// runtime was released or whose container died), with Error saying
	// how. Terminal sessions never set them.
	EndedBy string `json:"ended_by,omitempty"`
	Error   string `json:"error,omitempty"`
}

// SessionInputRequest is the payload of a session's input route.
type SessionInputRequest struct {
	Data string `json:"data"`
	// EOF closes the command's input after Data.
	EOF bool `json:"eof,omitempty"`
}

// SessionSignalRequest is the payload of a session's signal route.
type SessionSignalRequest struct {
	// Signal is a name such as "SIGINT", "TERM" or "kill".
	Signal string `json:"signal"`
}

// InputResult answers TerminalSessionsEndpoint/{session_id}/input.
type InputResult struct {
	SessionID string `json:"session_id"`
	// Bytes is how many bytes of data were written.
	Bytes int  `json:"bytes"`
	EOF   bool `json:"eof"`
}

// SignalResult answers TerminalSessionsEndpoint/{session_id}/signal.
type SignalResult struct {
	SessionID string `json:"session_id"`
	// Signal is the canonical name of the signal delivered, e.g. "SIGINT".
	Signal string `json:"signal"`
}
