package protocol

import "strings"

// Endpoint names: the routes a workspace client serves (docs/design.md,
// "Bridge routes"). This is the one list of them; the bridge mounts its
// handlers at these paths and callers (the mcp tools, tether mcp, tests)
// name the route they call with them.

// PingEndpoint echoes its payload as the result. It exists for tests,
// benchmarks and "is this workspace alive?" probes, so it does nothing else.
const PingEndpoint = "/api/ping"

// Terminal endpoints. The session routes take the session id as a path
// parameter: /api/terminal/sessions/{session_id}/output, …/input and
// …/signal.
const (
	TerminalExecuteEndpoint  = "/api/terminal/execute"
	TerminalSessionsEndpoint = "/api/terminal/sessions"
)

// Operations on one async session, the last element of its route:
// TerminalSessionsEndpoint/{session_id}/{op}, and for a sandbox
// workspace's sessions SandboxWorkspacesEndpoint/{workspace_id}/
// SandboxSessionsOp/{session_id}/{op}.
const (
	SessionOutputOp = "output"
	SessionInputOp  = "input"
	SessionSignalOp = "signal"
	// SessionEndOp kills the session's process tree and answers its end
	// (sandbox sessions).
	SessionEndOp = "end"
)

// Debug endpoints. Every /api/debug route but list-sessions takes
// session_id in its payload.
const (
	DebugContextEndpoint     = "/api/workspace/debug-context"
	DebugStartEndpoint       = "/api/debug/start-session"
	DebugBreakpointsEndpoint = "/api/debug/set-breakpoints"
	DebugContinueEndpoint    = "/api/debug/continue"
	DebugStepOverEndpoint    = "/api/debug/step-over"
	DebugStepIntoEndpoint    = "/api/debug/step-into"
	DebugStepOutEndpoint     = "/api/debug/step-out"
	DebugPauseEndpoint       = "/api/debug/pause"
	DebugSnapshotEndpoint    = "/api/debug/snapshot"
	DebugEvaluateEndpoint    = "/api/debug/evaluate"
	DebugListEndpoint        = "/api/debug/list-sessions"
	DebugStopEndpoint        = "/api/debug/stop-session"
	DebugOutputEndpoint      = "/api/debug/output"

	// Restart and watchpoints (docs/debugging.md).
	DebugRestartEndpoint     = "/api/debug/restart"
	DebugWatchpointsEndpoint = "/api/debug/set-watchpoints"
)

// Workspace endpoints: files, search and git on the bridge's own root
// (docs/workspace-files.md), and what the bridge serves (capabilities).
// The per-workspace sandbox routes take the same payloads under
// SandboxWorkspacesEndpoint/{workspace_id}/, named by what follows
// WorkspacePrefix ("read-file", "git/status", …).
const (
	WorkspaceReadFileEndpoint     = WorkspacePrefix + "read-file"
	WorkspaceWriteFileEndpoint    = WorkspacePrefix + "write-file"
	WorkspaceStrReplaceEndpoint   = WorkspacePrefix + "str-replace"
	WorkspaceListDirEndpoint      = WorkspacePrefix + "list-dir"
	WorkspaceStatEndpoint         = WorkspacePrefix + "stat"
	WorkspaceExistsEndpoint       = WorkspacePrefix + "exists"
	WorkspaceMkdirEndpoint        = WorkspacePrefix + "mkdir"
	WorkspaceRmEndpoint           = WorkspacePrefix + "rm"
	WorkspaceReaddirEndpoint      = WorkspacePrefix + "readdir"
	WorkspaceSearchEndpoint       = WorkspacePrefix + "search"
	WorkspaceGitStatusEndpoint    = WorkspaceGitPrefix + "status"
	WorkspaceGitDiffEndpoint      = WorkspaceGitPrefix + "diff"
	WorkspaceCapabilitiesEndpoint = WorkspacePrefix + "capabilities"

	// WorkspacePrefix starts every workspace route; what follows it names
	// the operation, the name the same operation has under a sandbox
	// workspace.
	WorkspacePrefix = "/api/workspace/"
	// WorkspaceGitPrefix starts the workspace git routes.
	WorkspaceGitPrefix = WorkspacePrefix + "git/"
)

// Sandbox endpoints (issue #6). Per-workspace routes live under
// SandboxWorkspacesEndpoint/{workspace_id}/….
const (
	SandboxWorkspacesEndpoint = "/api/sandbox/workspaces"
	SandboxListEndpoint       = "/api/sandbox/workspaces/list"
	SandboxEvictEndpoint      = "/api/sandbox/evict"
)

// Operations on one sandbox workspace, the end of its route:
// SandboxWorkspacesEndpoint/{workspace_id}/{op}. Besides these, every
// workspace file, search and git operation is served there under the name
// it has after WorkspacePrefix (see WorkspaceOp).
const (
	SandboxExecOp = "exec"
	// SandboxSessionsOp lists the workspace's async exec sessions; each
	// session's routes follow it: sessions/{session_id}/output, …/input,
	// …/signal and …/end (the Session*Op).
	SandboxSessionsOp  = "sessions"
	SandboxGitCommitOp = "git/commit"
	SandboxGitPushOp   = "git/push"
	SandboxReleaseOp   = "release"
	SandboxDestroyOp   = "destroy"
)

// WorkspaceOp returns the operation a workspace endpoint serves, the name
// the same operation has under a sandbox workspace:
// WorkspaceOp(WorkspaceReadFileEndpoint) is "read-file".
func WorkspaceOp(endpoint string) string { return strings.TrimPrefix(endpoint, WorkspacePrefix) }
