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
	return startCluster(t, n, nil)
}

// StartClusterTLS is StartCluster for a cluster that speaks TLS only, to
// its clients and between its nodes (tls-cluster yes), each node as
// StartTLS's server. A client reaches its nodes on the TLS ports the
// cluster announces. cfg's certificate must allow client authentication
// as well as server authentication: the nodes show it to each other on
// the cluster bus, which always asks for a client certificate.
func StartClusterTLS(t testing.TB, n int, cfg TLS) *Cluster {
	t.Helper()
	return startCluster(t, n, &cfg)
}

func startCluster(t testing.TB, n int, tlsCfg *TLS) *Cluster {
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
		extra := []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes-" + strconv.Itoa(i) + ".conf",
			"--cluster-node-timeout", "5000",
		}
		if tlsCfg != nil {
			extra = append(extra, "--tls-cluster", "yes", "--tls-replication", "yes")
		}
		c.Nodes = append(c.Nodes, startServer(t, extra, true, tlsCfg))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	var args []string
	if tlsCfg != nil {
		args = []string{"--tls", "--cacert", tlsCfg.CAFile}
		if tlsCfg.AuthClients {
			// The server's pair: its certificate must then allow client
			// authentication too (the nodes show it to each other).
			args = append(args, "--cert", tlsCfg.CertFile, "--key", tlsCfg.KeyFile)
		}
	}
	args = append(append(args, "--cluster", "create"), c.Addrs()...)
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
