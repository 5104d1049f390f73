package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterWait bounds how long a new cluster may take to report
// cluster_state:ok on every node.
const clusterWait = 60 * time.Second

// Cluster is a Redis Cluster of masters without replicas on 127.0.0.1.
type Cluster struct {
	// Nodes are the cluster's servers, in the order given to
	// redis-cli --cluster create.
	Nodes []*Server
}

// StartCluster starts n (at least 3) cluster-enabled redis-servers, joins
// them into one cluster with redis-cli --cluster create (no replicas) and
// waits until every node reports cluster_state:ok. The nodes are stopped in
// t.Cleanup.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, got %d", n)
	}
	Require(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redistest: redis-server is installed but redis-cli is not: %v", err)
	}
	c := &Cluster{}
	for i := range n {
		// Each node gets its own data directory through start, so the
		// nodes.conf files cannot collide.
		c.Nodes = append(c.Nodes, start(t, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes-" + strconv.Itoa(i) + ".conf",
			"--cluster-node-timeout", "5000",
		}, true))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, s := range c.Nodes {
		for {
			info, err := s.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("redistest: node %s not ok within %v: %v\n%s", s.Addr(), clusterWait, err, info)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return c
}

// Addrs returns host:port of every node.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}
