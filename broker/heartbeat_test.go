package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
)

// One scheduler beats for every connection: each is pinged on its own
// schedule, and only the one that stops answering is closed.
func TestEveryConnectionPingedAndOnlyTheSilentOneClosed(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) {
		c.PingInterval = 100 * time.Millisecond
		c.PingTimeout = 150 * time.Millisecond
	})
	var clients []*wireClient
	for i := range 20 {
		ws := fmt.Sprintf("ws%d", i)
		clients = append(clients, e.connect(ws, e.token(auth.RoleBridge, ws)))
	}
	silent := e.dialWith(nil, true)
	silent.send(`40{"token":"` + e.token(auth.RoleBridge, "silent") + `","workspace_id":"silent"}`)
	silent.next() // CONNECT ack
	start := time.Now()
	silent.waitClosed(2 * time.Second)
	if el := time.Since(start); el > 600*time.Millisecond {
		t.Fatalf("silent client closed after %s, want within pingInterval+pingTimeout and slack", el)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, c := range clients {
		testwait.Until(t, time.Until(deadline), func() bool { return c.pings.Load() >= 5 }, "every client to get 5 pings")
		select {
		case <-c.closed:
			t.Fatal("a client that answers pings was closed")
		default:
		}
	}
}
