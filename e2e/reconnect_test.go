package e2e_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// TestLateAckAfterReconnectAnswersNoCallOfTheNewConnection: the real
// socket.io-client reconnects the same socket after its connection drops,
// and an ack its handler sends afterwards, for a call of the old
// connection, goes out on the new one with the old ack id. That ack must
// not answer the new connection's call: each call gets its own answer. (The
// chaos run found a call answered with another call's echo: both
// connections counted their ack ids from 1.)
func TestLateAckAfterReconnectAnswersNoCallOfTheNewConnection(t *testing.T) {
	b := startBroker(t)
	const ws = "ws-late-ack"
	c, first := startIDE(t, b, ws, token(t, auth.RoleBridge, ws), "none", "--reconnect")
	if first["event"] != "connected" {
		t.Fatalf("socket.io-client did not connect: %v", first)
	}
	testwait.Until(t, 5*time.Second, func() bool { return b.holds(ws) }, "%s holding %s", b.name, ws)
	tok := token(t, auth.RoleCaller, ws)
	body := func(nonce string) string {
		return `{"endpoint":"/api/ping","payload":{"nonce":"` + nonce + `"},"timeout":30}`
	}

	a := b.goCall(ws, tok, body("a"))
	callA := c.await("tool_call", 5*time.Second)
	c.send(map[string]any{"cmd": "close-transport"})
	if r := await(t, a, 5*time.Second); r.resp.Error != protocol.CodeWorkspaceDisconnected {
		t.Fatalf("the call pending when the connection dropped: %+v, want workspace_disconnected", r.resp)
	}
	c.await("connected", 10*time.Second)
	testwait.Until(t, 5*time.Second, func() bool { return b.holds(ws) }, "%s holding %s", b.name, ws)

	bc := b.goCall(ws, tok, body("b"))
	callB := c.await("tool_call", 5*time.Second)
	// The old call's held ack, sent on the new connection, then the new
	// call's own.
	c.send(map[string]any{"cmd": "answer", "correlation_id": callA["correlation_id"], "via": "ack"})
	c.await("answered", 5*time.Second)
	c.send(map[string]any{"cmd": "answer", "correlation_id": callB["correlation_id"], "via": "ack"})
	r := await(t, bc, 5*time.Second)
	if r.status != http.StatusOK || !r.resp.Success {
		t.Fatalf("the new connection's call: HTTP %d %+v", r.status, r.resp)
	}
	var res struct {
		Echo struct{ Nonce string } `json:"echo"`
	}
	if err := json.Unmarshal(r.resp.Result, &res); err != nil || res.Echo.Nonce != "b" {
		t.Fatalf("the new connection's call was answered with %s, want its own echo (nonce b)", r.resp.Result)
	}
}
