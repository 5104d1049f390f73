//go:build !windows

package dap

import (
	"time"

	"github.com/tetherdev/tether/dap/node"
)

// The built-in Node adapter (dap/node) runs in this process, so there is no
// adapter process to keep warm: what a cold start waits for is the node it
// launches. Its warm nodes live in a node.Pool, which the adapter's Serve
// reaches through the manager's Env (Find builds Serve from it); the pool
// shares the warm pool's idle time and ends with it, and its nodes are
// listed as warm adapters of kind "node".

// newNodePool makes the manager's pool of warm nodes and hands it to the
// Node adapters that env's Find makes.
func newNodePool(idle time.Duration, env *Env) *node.Pool {
	p := node.NewPool(idle)
	env.nodeWarm = p
	return p
}

// warmNodes lists the ready warm nodes as warm adapters.
func warmNodes(p *node.Pool) []WarmAdapter {
	out := []WarmAdapter{}
	for _, w := range p.Ready() {
		out = append(out, WarmAdapter{Adapter: "node", Pid: w.Pid})
	}
	return out
}
