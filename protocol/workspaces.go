package protocol

import "time"

// Workspace describes a workspace a broker instance holds: the entries of
// GET /api/v1/workspaces, and of an instance's answer to a BusList request.
type Workspace struct {
	WorkspaceID string    `json:"workspace_id"`
	ConnectedAt time.Time `json:"connected_at"`
	Instance    string    `json:"instance"`
	InFlight    int       `json:"in_flight"`
}

// InstanceWorkspaces is one instance's answer to a BusList request: the
// workspaces it holds.
type InstanceWorkspaces struct {
	Instance   string      `json:"instance"`
	Workspaces []Workspace `json:"workspaces"`
}
