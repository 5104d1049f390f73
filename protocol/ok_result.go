package protocol

// OKResult answers the sandbox routes that have nothing else to say
// (SandboxWorkspacesEndpoint/{workspace_id}/release and …/destroy).
type OKResult struct {
	WorkspaceID string `json:"workspace_id"`
	OK          bool   `json:"ok"`
}
