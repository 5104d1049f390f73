package broker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
)

// The connection limits seen from a client: HTTP 429 with an Engine.IO
// error body before any session is made. httptest's clients are on
// loopback, so these brokers limit loopback too.

// wantDialRefused dials a new WebSocket session and checks it is refused
// 429 with an Engine.IO error body and a Retry-After.
func (e *env) wantDialRefused() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, res, err := websocket.Dial(ctx, e.wsURL(), nil)
	if err == nil {
		_ = ws.CloseNow()
		e.t.Fatal("dial succeeded, want a refusal")
	}
	if res == nil {
		e.t.Fatalf("dial failed without an HTTP answer: %v", err)
	}
	raw, _ := io.ReadAll(res.Body)
	status, retryAfter, body := res.StatusCode, res.Header.Get("Retry-After"), string(raw)
	var eio struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	}
	if status != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &eio) != nil || eio.Code == nil ||
		!strings.Contains(eio.Message, "Too many connections") || retryAfter == "" {
		e.t.Fatalf("refusal: HTTP %d Retry-After %q body %q, want 429 with an Engine.IO error and Retry-After", status, retryAfter, body)
	}
}

func TestConnectionFloodFromOneAddressIsAnswered429(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) {
		c.LimitLoopback, c.ConnRate, c.ConnBurst, c.MaxHandshakesPerIP = true, 0.01, 3, -1
	})
	served := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	e.dialRaw()
	e.dialRaw()
	e.wantDialRefused()
	// A polling handshake is a new session too.
	status, body := httpDo(t, http.MethodGet, e.pollURL(""), "")
	if status != http.StatusTooManyRequests || !strings.Contains(body, `"code":4`) {
		t.Fatalf("polling handshake: %d %q", status, body)
	}
	// The connection already served is not touched.
	res := e.goCall("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x","timeout":5}`)
	served.ackOK(served.nextCall(), `"still served"`)
	if got := awaitResult(t, res, 5*time.Second); string(got.resp.Result) != `"still served"` {
		t.Fatalf("served workspace got %+v", got.resp)
	}
	waitMetric(t, e, `tether_connections_refused_total{limit="connection rate"} 2`)
}

func TestHandshakesWithoutConnectAreBoundedPerAddress(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) {
		c.LimitLoopback, c.ConnRate, c.MaxHandshakesPerIP = true, -1, 2
	})
	first := e.dialRaw()
	e.dialRaw()
	e.wantDialRefused()
	// A CONNECT with a good token ends a handshake: a new one fits.
	first.send(`40{"token":"` + e.token(auth.RoleBridge, "ws1") + `","workspace_id":"ws1"}`)
	if f := first.next(); !strings.HasPrefix(string(f), `40{"sid":`) {
		t.Fatalf("CONNECT answered %q", f)
	}
	third := e.dialRaw()
	e.wantDialRefused()
	// A handshake that ends without CONNECT gives its place back.
	_ = third.ws.CloseNow()
	testwait.Until(t, 5*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ws, _, err := websocket.Dial(ctx, e.wsURL(), nil)
		cancel()
		if err == nil {
			_ = ws.CloseNow()
		}
		return err == nil
	}, "a handshake place after a client left")
	waitMetric(t, e, `tether_connections_refused_total{limit="too many handshakes in progress"}`)
}

func TestLoopbackIsNotLimitedByDefault(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) { c.ConnRate, c.ConnBurst, c.MaxHandshakesPerIP = 0.01, 1, 1 })
	for range 20 {
		e.dialRaw()
	}
}
