package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

type acquireArgs struct {
	Repo    string `json:"repo" jsonschema:"the repository: a URL (https://host/owner/name.git, ssh, file://) or a local path of a git repository on the workspace's machine"`
	BaseRef string `json:"base_ref,omitempty" jsonschema:"branch, tag or commit to start from; default the repository's default branch"`
	Mode    string `json:"mode" enum:"analysis,edit,task" jsonschema:"analysis: read-only look at base_ref; edit: a branch of your own to change and commit (key names it); task: the same for a task id"`
	Key     string `json:"key,omitempty" jsonschema:"for edit and task: the conversation or task id that names the workspace and its branch (letters, digits, '_', '.', '-'); the same key gets the same workspace back"`
	UserID  string `json:"user_id,omitempty" default:"agent" jsonschema:"who the workspace belongs to; default agent"`
	Project string `json:"project_id,omitempty" default:"default" jsonschema:"project the workspace belongs to; default default"`
	Runtime string `json:"runtime,omitempty" enum:"subprocess,bwrap,container" jsonschema:"how commands run: subprocess on the host, bwrap isolated (read-only system, private /tmp), or container in an image of the project's toolchain with CPU, memory and process limits (the workspace at /workspace)"`
	Network string `json:"network,omitempty" enum:"none,host" jsonschema:"network for commands: none, or host; default none for bwrap and container"`
	// Container is the container runtime's options.
	Container *containerArgs `json:"container,omitempty" jsonschema:"options of runtime container"`
}

type containerArgs struct {
	Image  string            `json:"image,omitempty" jsonschema:"image the commands run in, present on the engine (nothing is pulled); default the bridge's"`
	CPUs   float64           `json:"cpus,omitempty" min:"0" jsonschema:"CPU limit in CPUs, e.g. 1.5; 0 none"`
	Memory string            `json:"memory,omitempty" jsonschema:"memory limit: bytes or a number with k, m or g, e.g. 512m; at least 6m"`
	Pids   int64             `json:"pids,omitempty" min:"0" jsonschema:"limit of processes and threads alive at once; at least 16, 0 none"`
	Env    map[string]string `json:"env,omitempty" jsonschema:"environment of every command"`
	User   string            `json:"user,omitempty" jsonschema:"numeric uid:gid the commands run as; default the worktree owner's"`
}

func (a acquireArgs) timeout() time.Duration { return acquireWait }

// acquireWait bounds an acquire: a first clone of a big repository takes a
// while.
const acquireWait = 50 * time.Second

func addSandboxTools(s *Server) {
	add(s, spec{
		name:  "sandbox_acquire",
		title: "Get a sandbox workspace",
		description: "Get an isolated git worktree of a repository on the workspace's machine: a fresh one, or the one this key already has (with its uncommitted edits). " +
			"Returns its sandbox_id: pass it to file_read, file_write, file_str_replace, file_list, file_search, git_status, git_diff, git_commit, git_push and terminal_run to act there instead of on the bridge's root.",
		routes: []string{protocol.SandboxWorkspacesEndpoint}, idempotent: true,
	}, acquire)
	add(s, spec{
		name:        "sandbox_release",
		title:       "Release a sandbox workspace",
		description: "Stop a sandbox workspace's commands. Its files and branch stay, and sandbox_acquire with the same key gets it back.",
		routes:      []string{sandboxPattern(protocol.SandboxReleaseOp)}, idempotent: true,
	}, func(ctx context.Context, tc *toolCall, in sandboxArgs) (protocol.OKResult, string, error) {
		var out protocol.OKResult
		err := tc.call(ctx, sandboxRoute(in.SandboxID, protocol.SandboxReleaseOp), struct{}{}, quickCall, &out)
		return out, fmt.Sprintf("Released sandbox %s; its files stay.", line(in.SandboxID, maxValue)), err
	})
}

type sandboxArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox workspace (from sandbox_acquire)"`
}

func acquire(ctx context.Context, tc *toolCall, in acquireArgs) (sandbox.AcquireResult, string, error) {
	var out sandbox.AcquireResult
	req := sandbox.AcquireRequest{Repo: in.Repo, BaseRef: in.BaseRef, Mode: in.Mode, UserID: in.UserID, ProjectID: in.Project, Runtime: in.Runtime, Network: in.Network}
	if c := in.Container; c != nil {
		req.Container = &sandbox.ContainerOptions{Image: c.Image, CPUs: c.CPUs, Memory: c.Memory, Pids: c.Pids, Env: c.Env, User: c.User}
	}
	switch in.Mode {
	case sandbox.ModeEdit:
		req.ConversationID = in.Key
	case sandbox.ModeTask:
		req.TaskID = in.Key
	}
	tc.wait("preparing the sandbox")
	err := tc.call(ctx, protocol.SandboxWorkspacesEndpoint, req, acquireWait, &out)
	if err != nil {
		// The route names the field the key went to.
		if te, ok := err.(*toolError); ok {
			te.Message = strings.NewReplacer("conversation_id", "key", "task_id", "key").Replace(te.Message)
		}
		return out, "", err
	}
	var b strings.Builder
	how := "Got"
	if out.Created {
		how = "Created"
	}
	fmt.Fprintf(&b, "%s sandbox %s (%s", how, line(out.WorkspaceID, maxValue), line(out.Mode, maxValue))
	if out.Branch != "" {
		fmt.Fprintf(&b, ", branch %s", line(out.Branch, maxValue))
	}
	fmt.Fprintf(&b, ") from %s at %s; runtime %s, network %s.", line(out.BaseRef, maxValue), line(shortHash(out.BaseCommit), maxValue), line(out.Runtime, maxValue), line(out.Network, maxValue))
	if out.Container != nil && out.Container.Image != "" {
		fmt.Fprintf(&b, " Image %s; the workspace is /workspace inside.", line(out.Container.Image, maxValue))
	}
	if out.Artifact != "" {
		fmt.Fprintf(&b, "\nAn earlier worktree of this key was evicted with changes; they were saved as %s.", line(out.Artifact, maxValue))
	}
	fmt.Fprintf(&b, "\nNext: pass sandbox_id %s to the file, search, git and terminal_run tools.", line(out.WorkspaceID, maxValue))
	return out, b.String(), nil
}
