package redistest_test

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tetherdev/tether/broker/bus/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRestartKeepsPortAndStartsEmpty(t *testing.T) {
	s := redistest.Start(t)
	port := s.Port()
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING answered by a stopped server")
	}
	s.Restart()
	if s.Port() != port {
		t.Fatalf("port changed from %d to %d", port, s.Port())
	}
	if v, err := s.Do("GET", "k"); err != nil || v != "" {
		t.Fatalf("GET k after restart = %q, %v; want nothing kept", v, err)
	}
}

func TestClusterIsOK(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	for _, n := range c.Nodes {
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:3"} {
			if !strings.Contains(info, want) {
				t.Fatalf("%s: CLUSTER INFO lacks %s:\n%s", n.Addr(), want, info)
			}
		}
	}
}

func TestProxyBlackholesSubscribersOnly(t *testing.T) {
	s := redistest.Start(t)
	p := redistest.StartProxy(t, s.Addr())
	// A plain command through the proxy works.
	if reply, err := redistest.Do(p.Addr(), "PING"); err != nil || reply != "PONG" {
		t.Fatalf("PING through the proxy = %q, %v", reply, err)
	}
	if n := p.BlackholeSubscribers(); n != 0 {
		t.Fatalf("black-holed %d connections without a subscriber", n)
	}
}
