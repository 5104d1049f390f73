//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// Router and dispatcher behaviour, driven in-process through Dispatch (the
// socket and HTTP transports share the same dispatcher; see client_test.go
// and http_test.go for those paths).

type addRequest struct {
	A int `json:"a"`
	B int `json:"b"`
}

type addResponse struct {
	Sum int `json:"sum"`
}

type checkedRequest struct {
	Name string `json:"name"`
}

func (r checkedRequest) Validate() error {
	if r.Name == "" {
		return errors.New("name is required")
	}
	return nil
}

func localBridge(t testing.TB, cfg bridge.Config, mount func(r *bridge.Router)) *bridge.Bridge {
	t.Helper()
	if cfg.WorkspaceID == "" {
		cfg.WorkspaceID = "ws-local"
	}
	return startBridge(t, cfg, mount)
}

func call(endpoint string, payload string, timeout float64) protocol.ToolCall {
	c := protocol.ToolCall{CorrelationID: "c-" + endpoint, Endpoint: endpoint, Timeout: timeout}
	if payload != "" {
		c.Payload = json.RawMessage(payload)
	}
	return c
}

func TestPingEchoesPayload(t *testing.T) {
	b := localBridge(t, bridge.Config{}, nil)
	resp := b.Dispatch(context.Background(), call(protocol.PingEndpoint, `{"n":1,"s":"x"}`, 5))
	wantSuccess(t, resp, `{"n":1,"s":"x"}`)
	if resp.CorrelationID != "c-/api/ping" {
		t.Errorf("correlation_id = %q, want the call's", resp.CorrelationID)
	}
}

func TestPingWithoutPayloadAnswersEmptyObject(t *testing.T) {
	b := localBridge(t, bridge.Config{}, nil)
	wantSuccess(t, b.Dispatch(context.Background(), call(protocol.PingEndpoint, "", 5)), `{}`)
}

func TestTypedRouteDecodesPayloadAndEncodesResult(t *testing.T) {
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/add", func(_ context.Context, _ *bridge.Call, req addRequest) (addResponse, error) {
			return addResponse{Sum: req.A + req.B}, nil
		})
	})
	wantSuccess(t, b.Dispatch(context.Background(), call("/api/test/add", `{"a":2,"b":3}`, 5)), `{"sum":5}`)
}

func TestUnknownPayloadFieldAnswersInvalidPayloadNamingItAndTheClosestField(t *testing.T) {
	var called atomic.Int32
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/add", func(_ context.Context, _ *bridge.Call, req addRequest) (addResponse, error) {
			called.Add(1)
			return addResponse{Sum: req.A + req.B}, nil
		})
	})
	for payload, want := range map[string]string{
		`{"a":2,"b":3,"extra":true}`: `unknown field "extra" (known fields: a, b)`,
		`{"a":2,"B ":3}`:             `unknown field "B " (did you mean "b"?)`,
		`{"a":2,"b":"3"}`:            `field "b": expected an integer, got a string`,
	} {
		resp := b.Dispatch(context.Background(), call("/api/test/add", payload, 5))
		wantFailure(t, resp, protocol.CodeInvalidPayload)
		if resp.Message != "decoding payload for /api/test/add: "+want {
			t.Errorf("%s: message %q, want it to end %q", payload, resp.Message, want)
		}
	}
	if n := called.Load(); n != 0 {
		t.Errorf("handler called %d times for refused payloads", n)
	}
}

func TestUnknownRouteAnswersUnknownRoute(t *testing.T) {
	b := localBridge(t, bridge.Config{}, nil)
	for _, endpoint := range []string{"/api/nope", "/api/ping/", "/API/PING", "/", "api/ping", "", "/api/%zz", "//host/api/ping"} {
		t.Run(endpoint, func(t *testing.T) {
			wantFailure(t, b.Dispatch(context.Background(), call(endpoint, `{}`, 5)), protocol.CodeUnknownRoute)
		})
	}
}

func TestBadPayloadAnswersInvalidPayloadWithoutCallingHandler(t *testing.T) {
	var called atomic.Int32
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/add", func(_ context.Context, _ *bridge.Call, req addRequest) (addResponse, error) {
			called.Add(1)
			return addResponse{}, nil
		})
	})
	for _, payload := range []string{`{"a":"two"}`, `[1,2]`, `"text"`, `{"a":1`, `nope`} {
		t.Run(payload, func(t *testing.T) {
			wantFailure(t, b.Dispatch(context.Background(), call("/api/test/add", payload, 5)), protocol.CodeInvalidPayload)
		})
	}
	if n := called.Load(); n != 0 {
		t.Errorf("handler called %d times for undecodable payloads", n)
	}
}

func TestValidateFailureAnswersInvalidPayload(t *testing.T) {
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/checked", func(_ context.Context, _ *bridge.Call, req checkedRequest) (string, error) {
			return "hello " + req.Name, nil
		})
	})
	resp := b.Dispatch(context.Background(), call("/api/test/checked", `{}`, 5))
	wantFailure(t, resp, protocol.CodeInvalidPayload)
	if !strings.Contains(resp.Message, "name is required") {
		t.Errorf("message = %q, want the validation error", resp.Message)
	}
	wantSuccess(t, b.Dispatch(context.Background(), call("/api/test/checked", `{"name":"x"}`, 5)), `"hello x"`)
}

func TestHandlerPanicAnswersInternalErrorAndLogsStack(t *testing.T) {
	logs := newLogSink(t)
	b := localBridge(t, bridge.Config{Logger: logs.logger()}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/panic", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			panic("boom")
		})
	})
	resp := b.Dispatch(context.Background(), call("/api/test/panic", `{}`, 5))
	wantFailure(t, resp, protocol.CodeInternalError)
	if !strings.Contains(resp.Message, "boom") {
		t.Errorf("message = %q, want the panic value", resp.Message)
	}
	logs.waitFor(t, "handler panicked")
	logs.waitFor(t, "dispatch_test.go") // the stack names the panicking handler
	// The bridge survives: the next call is served.
	wantSuccess(t, b.Dispatch(context.Background(), call(protocol.PingEndpoint, `{}`, 5)), `{}`)
}

func TestHandlerErrorKeepsProtocolErrorCode(t *testing.T) {
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/coded", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			return struct{}{}, fmt.Errorf("looking up session: %w",
				protocol.Errorf(protocol.CodeSessionNotFound, "no session %q", "s9"))
		})
		bridge.Handle(r, "/api/test/plain", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			return struct{}{}, errors.New("disk on fire")
		})
	})
	resp := b.Dispatch(context.Background(), call("/api/test/coded", `{}`, 5))
	wantFailure(t, resp, protocol.CodeSessionNotFound)
	if resp.Message != `no session "s9"` {
		t.Errorf("message = %q, want the *protocol.Error's message", resp.Message)
	}
	resp = b.Dispatch(context.Background(), call("/api/test/plain", `{}`, 5))
	wantFailure(t, resp, protocol.CodeInternalError)
	if resp.Message != "disk on fire" {
		t.Errorf("message = %q, want the error text", resp.Message)
	}
}

func TestHandlerOverrunAnswersHandlerTimeoutBeforeDeadline(t *testing.T) {
	g := newGate()
	defer g.open()
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/stuck", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			<-g.ch // ignores ctx on purpose
			return struct{}{}, nil
		})
	})
	const timeout = 2 * time.Second
	start := time.Now()
	resp := b.Dispatch(context.Background(), call("/api/test/stuck", `{}`, timeout.Seconds()))
	elapsed := time.Since(start)
	wantFailure(t, resp, protocol.CodeHandlerTimeout)
	// The margin for a 2s call is 200ms: the answer comes at 1.8s, before the
	// broker's own 2s deadline, and not earlier.
	if elapsed >= timeout {
		t.Errorf("handler_timeout after %v, want before the call's %v timeout", elapsed, timeout)
	}
	if elapsed < timeout-timeout/10-10*time.Millisecond {
		t.Errorf("handler_timeout after %v, want the handler to get %v", elapsed, timeout-timeout/10)
	}
}

func TestHandlerHonouringDeadlineAnswersHandlerTimeoutNotItsError(t *testing.T) {
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/wait", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			<-ctx.Done()
			return struct{}{}, fmt.Errorf("waiting for output: %w", ctx.Err())
		})
	})
	wantFailure(t, b.Dispatch(context.Background(), call("/api/test/wait", `{}`, 0.2)), protocol.CodeHandlerTimeout)
}

func TestCallerCancellingAnswersCancelledAndCancelsHandler(t *testing.T) {
	started := make(chan struct{})
	sawCancel := make(chan error, 1)
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/wait", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			close(started)
			<-ctx.Done()
			sawCancel <- ctx.Err()
			return struct{}{}, ctx.Err()
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	wantFailure(t, b.Dispatch(ctx, call("/api/test/wait", `{}`, 30)), protocol.CodeCancelled)
	if err := recv(t, sawCancel, "the handler to see cancellation"); !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx error = %v, want context.Canceled", err)
	}
}

func TestPathParamsReachHandler(t *testing.T) {
	type seen struct{ id, route, endpoint, corr, ws string }
	got := make(chan seen, 1)
	b := localBridge(t, bridge.Config{WorkspaceID: "ws-params"}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/sessions/:session_id/output", func(_ context.Context, c *bridge.Call, _ struct{}) (string, error) {
			got <- seen{c.Param("session_id"), c.Route(), c.Endpoint(), c.CorrelationID(), c.WorkspaceID()}
			return c.Param("session_id"), nil
		})
	})
	for _, tc := range []struct{ endpoint, id string }{
		{"/api/test/sessions/s-1/output", "s-1"},
		{"/api/test/sessions/a%2Fb/output", "a/b"},
	} {
		wantSuccess(t, b.Dispatch(context.Background(), call(tc.endpoint, `{}`, 5)), mustJSONString(t, tc.id))
		s := recv(t, got, "the handler")
		want := seen{tc.id, "/api/test/sessions/:session_id/output", tc.endpoint, "c-" + tc.endpoint, "ws-params"}
		if s != want {
			t.Errorf("handler saw %+v, want %+v", s, want)
		}
	}
}

func mustJSONString(t testing.TB, s string) string { return string(mustJSON(t, s)) }

func TestCallDeadlineLeavesMarginBeforeTimeout(t *testing.T) {
	deadlines := make(chan time.Time, 1)
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/deadline", func(ctx context.Context, c *bridge.Call, _ struct{}) (struct{}, error) {
			if d, ok := ctx.Deadline(); !ok || !d.Equal(c.Deadline()) {
				t.Errorf("ctx deadline %v (set %v) differs from Call.Deadline %v", d, ok, c.Deadline())
			}
			deadlines <- c.Deadline()
			return struct{}{}, nil
		})
	})
	for _, tc := range []struct {
		timeout float64
		budget  time.Duration // timeout minus max(50ms, min(500ms, 10%))
	}{
		{0, 29500 * time.Millisecond}, // absent: protocol.DefaultTimeout
		{2, 1800 * time.Millisecond},
		{0.3, 250 * time.Millisecond},
	} {
		start := time.Now()
		b.Dispatch(context.Background(), call("/api/test/deadline", `{}`, tc.timeout))
		d := recv(t, deadlines, "the deadline").Sub(start)
		if d > tc.budget+100*time.Millisecond || d < tc.budget-time.Second {
			t.Errorf("timeout %v: handler budget %v, want about %v", tc.timeout, d, tc.budget)
		}
	}
}

func TestNegativeTimeoutAnswersInvalidPayload(t *testing.T) {
	b := localBridge(t, bridge.Config{}, nil)
	wantFailure(t, b.Dispatch(context.Background(), call(protocol.PingEndpoint, `{}`, -1)), protocol.CodeInvalidPayload)
}

func TestConcurrencyBoundAnswersOverloaded(t *testing.T) {
	g := newGate()
	defer g.open()
	started := make(chan struct{}, 2)
	b := localBridge(t, bridge.Config{MaxInFlight: 2}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/block", func(ctx context.Context, _ *bridge.Call, _ struct{}) (struct{}, error) {
			started <- struct{}{}
			<-g.ch
			return struct{}{}, nil
		})
	})
	var wg sync.WaitGroup
	results := make(chan protocol.ToolResponse, 2)
	for range 2 {
		wg.Go(func() { results <- b.Dispatch(context.Background(), call("/api/test/block", `{}`, 30)) })
	}
	recv(t, started, "first handler")
	recv(t, started, "second handler")

	start := time.Now()
	wantFailure(t, b.Dispatch(context.Background(), call(protocol.PingEndpoint, `{}`, 30)), protocol.CodeOverloaded)
	if d := time.Since(start); d > time.Second {
		t.Errorf("overloaded took %v, want an immediate answer", d)
	}

	g.open()
	wg.Wait()
	close(results)
	for resp := range results {
		wantSuccess(t, resp, `{}`)
	}
	// Slots are free again.
	wantSuccess(t, b.Dispatch(context.Background(), call(protocol.PingEndpoint, `{}`, 30)), `{}`)
}

func TestOverrunHandlerKeepsItsSlotUntilItReturns(t *testing.T) {
	g := newGate()
	defer g.open()
	finished := make(chan struct{})
	b := localBridge(t, bridge.Config{MaxInFlight: 1}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/stuck", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
			defer close(finished)
			<-g.ch
			return struct{}{}, nil
		})
	})
	wantFailure(t, b.Dispatch(context.Background(), call("/api/test/stuck", `{}`, 0.2)), protocol.CodeHandlerTimeout)
	wantFailure(t, b.Dispatch(context.Background(), call(protocol.PingEndpoint, `{}`, 5)), protocol.CodeOverloaded)
	g.open()
	recv(t, finished, "the stuck handler to return")
	// The slot is released just before the handler goroutine ends; the
	// dispatcher makes no promise about the instant, so try until served.
	testwait.Until(t, waitLimit, func() bool {
		resp := b.Dispatch(context.Background(), call(protocol.PingEndpoint, `{}`, 5))
		if resp.Success {
			return true
		}
		wantFailure(t, resp, protocol.CodeOverloaded)
		return false
	}, "the stuck handler's slot to be released")
}

func TestCallLoggerCarriesCallFields(t *testing.T) {
	logs := newLogSink(t)
	b := localBridge(t, bridge.Config{Logger: logs.logger(), WorkspaceID: "ws-log"}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/log", func(_ context.Context, c *bridge.Call, _ struct{}) (struct{}, error) {
			c.Logger().Info().Msg("from the handler")
			return struct{}{}, nil
		})
	})
	b.Dispatch(context.Background(), protocol.ToolCall{CorrelationID: "corr-42", Endpoint: "/api/test/log", Timeout: 5})
	logs.waitFor(t, "from the handler")
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "from the handler") {
			for _, want := range []string{`"correlation_id":"corr-42"`, `"endpoint":"/api/test/log"`, `"workspace_id":"ws-log"`} {
				if !strings.Contains(line, want) {
					t.Errorf("handler log line %s lacks %s", line, want)
				}
			}
		}
	}
}

func TestHandleAfterServingStartedPanics(t *testing.T) {
	b := localBridge(t, bridge.Config{}, nil)
	b.Dispatch(context.Background(), call(protocol.PingEndpoint, `{}`, 5))
	defer func() {
		if recover() == nil {
			t.Error("Handle after serving started did not panic")
		}
	}()
	bridge.Handle(b.Router(), "/api/test/late", func(context.Context, *bridge.Call, struct{}) (struct{}, error) {
		return struct{}{}, nil
	})
}

func TestRouterListsMountedRoutes(t *testing.T) {
	b := localBridge(t, bridge.Config{}, func(r *bridge.Router) {
		bridge.Handle(r, "/api/test/a", func(context.Context, *bridge.Call, struct{}) (struct{}, error) { return struct{}{}, nil })
	})
	// The built-in routes come first (ping, then each domain's), in
	// mounting order; routes mounted on the Router come after them.
	routes := b.Router().Routes()
	if len(routes) < 2 || routes[0] != protocol.PingEndpoint || routes[len(routes)-1] != "/api/test/a" {
		t.Errorf("Routes() = %q", strings.Join(routes, " "))
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	file := t.TempDir() + "/file"
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]bridge.Config{
		"broker without workspace": {BrokerURL: "http://127.0.0.1:1"},
		"bad scheme":               {BrokerURL: "ftp://127.0.0.1:1", WorkspaceID: "w"},
		"no host":                  {BrokerURL: "http://", WorkspaceID: "w"},
		"root missing":             {Root: t.TempDir() + "/missing"},
		"root is a file":           {Root: file},
		"negative bound":           {MaxInFlight: -1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := bridge.New(cfg); err == nil {
				t.Errorf("New(%+v) succeeded, want an error", cfg)
			}
		})
	}
}
