//go:build !windows

// Package sandbox gives agents durable, isolated places to work on
// repositories. It knows nothing of tunnels: the bridge adapts Service to
// routes in bridge/routes_sandbox.go.
//
// # Three layers
//
//   - A repo cache is the durable bare clone of one repository, under
//     {root}/repos/{host}/{owner}/{repo}.git. It is fetched, never edited:
//     its fetch refspec is +refs/heads/*:refs/remotes/origin/*, so a fetch
//     never overwrites the agent branches (refs/heads/agent/…) kept in it.
//   - A workspace is a git worktree on a repo cache, under
//     {root}/worktrees/{host}/{owner}/{repo}/{workspace_id}, keyed by mode:
//     analysis (user, project, base_ref) detached at the base,
//     edit (user, project, conversation_id) on agent/edits-{conversation_id},
//     task (user, project, task_id) on agent/task-{task_id}. Its files,
//     uncommitted edits included, survive runtime and process restarts.
//   - A runtime runs commands in a workspace: subprocess (on the host),
//     bwrap (read-only root, the worktree read-write, private /tmp, no
//     network unless asked) or container (package sandbox/container).
//     Commands run to their end (Exec) or as async sessions (sessions.go:
//     Runtime.Start, output read by offset, stdin, signals), which end
//     with their runtime. Stopping or replacing it leaves the workspace as
//     it is.
//
// # Ports and adapters
//
// Service depends on small interfaces (ports.go): RepoCache and Worktrees
// (implemented by LocalGit), RuntimeProvider (Subprocess, Bwrap), Store
// (JSONStore, one JSON file written atomically) and Locker (Locks). Tests
// and other deployments may swap any of them.
//
// # Safety
//
// Every path an agent names is resolved inside its worktree with os.Root
// (Tree, which the bridge also runs on its own root): absolute paths, "..",
// NUL bytes, over-long paths and symlinks leading out answer invalid_path. Repo
// URLs, refs and ids that end up in branch names are validated before git
// sees them (invalid_ref). Auth tokens reach git only through the
// environment of the clone, fetch or push that needs them; they are never
// stored, written to git config or logged. tether's own git calls run with
// hooks and fsmonitor disabled, GIT_TERMINAL_PROMPT=0, and an explicit
// --git-dir, so nothing an agent writes in a worktree can make them run a
// program.
//
// # Concurrency
//
// All Service methods may be called concurrently. Mutating calls on one
// workspace are serialised by a per-workspace lock; clone, fetch, worktree
// add/remove/prune and branch creation by a per-repository lock. Reads take
// no lock and use git --no-optional-locks.
package sandbox
