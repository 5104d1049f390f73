package broker

import "github.com/tetherdev/tether/broker/auth"

// Names kept for e2e tests until they say auth.* themselves; they go then.
const (
	RoleBridge   = auth.RoleBridge
	RoleCaller   = auth.RoleCaller
	AnyWorkspace = auth.AnyWorkspace
)

// IssueToken is auth.IssueToken.
var IssueToken = auth.IssueToken
