package protocol

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
