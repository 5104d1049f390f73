//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// The bridge against the real broker package, end to end in one process:
// caller HTTP API → broker → WebSocket → bridge → route → back.

type realBroker struct {
	srv    *httptest.Server
	secret []byte
	client *http.Client
}

func newRealBroker(t *testing.T) *realBroker {
	t.Helper()
	secret := []byte("bridge-test-secret-0123456789abcdef")
	b, err := broker.New(broker.Config{Secret: secret, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	tr := &http.Transport{}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("broker Shutdown: %v", err)
		}
		srv.Close()
		tr.CloseIdleConnections()
	})
	return &realBroker{srv: srv, secret: secret, client: &http.Client{Transport: tr}}
}

func (r *realBroker) token(t *testing.T, role, workspace string) string {
	t.Helper()
	tok, err := auth.IssueToken(r.secret, role, []string{workspace}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// bridge starts a bridge for workspace with a valid bridge token.
func (r *realBroker) bridge(t *testing.T, workspace string, cfg bridge.Config, mount func(*bridge.Router)) (*bridge.Bridge, *logSink) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = r.token(t, auth.RoleBridge, workspace)
	}
	logs := newLogSink(t)
	cfg.BrokerURL, cfg.WorkspaceID, cfg.Logger = r.srv.URL, workspace, logs.logger()
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin, cfg.BackoffMax = time.Millisecond, 10*time.Millisecond
	}
	return startBridge(t, cfg, mount), logs
}

// call sends a call through the broker's caller API.
func (r *realBroker) call(t *testing.T, ctx context.Context, workspace, endpoint, payload string, timeout float64) (protocol.ToolResponse, error) {
	t.Helper()
	body := mustJSON(t, map[string]any{"endpoint": endpoint, "payload": json.RawMessage(payload), "timeout": timeout})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		r.srv.URL+"/api/v1/workspaces/"+workspace+"/calls", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token(t, auth.RoleCaller, workspace))
	req.Header.Set("Content-Type", "application/json")
	res, err := r.client.Do(req)
	if err != nil {
		return protocol.ToolResponse{}, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var resp protocol.ToolResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("broker answered %d %q: %v", res.StatusCode, raw, err)
	}
	return resp, nil
}

func TestWithBrokerPingRoundTrip(t *testing.T) {
	r := newRealBroker(t)
	b, _ := r.bridge(t, "ws-rt", bridge.Config{}, nil)
	if err := b.WaitConnected(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := r.call(t, context.Background(), "ws-rt", protocol.PingEndpoint, `{"hello":"broker"}`, 5)
	if err != nil {
		t.Fatal(err)
	}
	wantSuccess(t, resp, `{"hello":"broker"}`)
	resp, _ = r.call(t, context.Background(), "ws-rt", "/api/nope", `{}`, 5)
	wantFailure(t, resp, protocol.CodeUnknownRoute)
}

func TestWithBrokerHandlerTimeoutBeatsBrokerTimeout(t *testing.T) {
	r := newRealBroker(t)
	g := newGate()
	defer g.open()
	b, _ := r.bridge(t, "ws-slow", bridge.Config{}, func(rt *bridge.Router) {
		bridge.Handle(rt, "/api/test/stuck", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			<-g.ch
			return struct{}{}, nil
		})
	})
	if err := b.WaitConnected(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := r.call(t, context.Background(), "ws-slow", "/api/test/stuck", `{}`, 1)
	if err != nil {
		t.Fatal(err)
	}
	// handler_timeout, not the broker's own timeout: the bridge answered first.
	wantFailure(t, resp, protocol.CodeHandlerTimeout)
}

func TestWithBrokerCallerGoneCancelsHandler(t *testing.T) {
	r := newRealBroker(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	b, logs := r.bridge(t, "ws-gone", bridge.Config{}, func(rt *bridge.Router) {
		bridge.Handle(rt, "/api/test/wait", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			close(started)
			<-ctx.Done()
			cause <- ctx.Err()
			return struct{}{}, ctx.Err()
		})
	})
	if err := b.WaitConnected(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.call(t, ctx, "ws-gone", "/api/test/wait", `{}`, 30)
		done <- err
	}()
	recv(t, started, "the handler to start")
	cancel()
	if err := recv(t, done, "the caller to give up"); !errors.Is(err, context.Canceled) {
		t.Fatalf("caller error = %v, want context.Canceled", err)
	}
	if err := recv(t, cause, "tool_cancel to reach the handler"); !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx error = %v, want context.Canceled", err)
	}
	logs.waitFor(t, "tool_cancel received")
}

func TestWithBrokerBadTokenBacksOffAsUnauthorized(t *testing.T) {
	r := newRealBroker(t)
	_, logs := r.bridge(t, "ws-auth", bridge.Config{Token: "not-a-token", AuthBackoff: time.Minute}, nil)
	logs.waitFor(t, `"code":"unauthorized"`)
	logs.waitFor(t, "check the token")
}

func TestWithBrokerTokenForAnotherWorkspaceIsForbidden(t *testing.T) {
	r := newRealBroker(t)
	_, logs := r.bridge(t, "ws-a", bridge.Config{Token: r.token(t, auth.RoleBridge, "ws-b"), AuthBackoff: time.Minute}, nil)
	logs.waitFor(t, `"code":"forbidden"`)
}

func TestWithBrokerReplacedBridgeBacksOffThenTakesOver(t *testing.T) {
	r := newRealBroker(t)
	first, firstLogs := r.bridge(t, "ws-dup", bridge.Config{ReplacedBackoff: 300 * time.Millisecond}, nil)
	if err := first.WaitConnected(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The second bridge, once replaced in turn, waits far longer than the
	// test, so the takeover happens exactly twice.
	second, secondLogs := r.bridge(t, "ws-dup", bridge.Config{ReplacedBackoff: time.Hour}, nil)
	if err := second.WaitConnected(context.Background()); err != nil {
		t.Fatal(err)
	}
	firstLogs.waitFor(t, "took over this workspace")
	secondLogs.waitFor(t, "took over this workspace")
	if err := first.WaitConnected(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := r.call(t, context.Background(), "ws-dup", protocol.PingEndpoint, `{}`, 5)
	if err != nil {
		t.Fatal(err)
	}
	wantSuccess(t, resp, `{}`)
}
