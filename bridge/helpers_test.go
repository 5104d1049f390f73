//go:build !windows

package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/protocol"
)

// waitLimit bounds every wait in these tests. It is not a sleep: waits end as
// soon as their event happens; the limit only turns a hang into a failure.
const waitLimit = 10 * time.Second

// logSink collects a bridge's log lines and lets a test wait for one.
type logSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogSink(t testing.TB) *logSink {
	s := &logSink{changed: make(chan struct{})}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bridge log:\n%s", s.String())
		}
	})
	return s
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return len(p), nil
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *logSink) logger() zerolog.Logger { return zerolog.New(s).Level(zerolog.DebugLevel) }

// waitFor blocks until a log line contains substr.
func (s *logSink) waitFor(t testing.TB, substr string) {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		s.mu.Lock()
		found := strings.Contains(s.buf.String(), substr)
		ch := s.changed
		s.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("no log line contains %q", substr)
		}
	}
}

// startBridge creates a bridge from cfg, lets mount add test routes, and runs
// it until the test ends; cleanup stops it and checks that Run returned.
func startBridge(t testing.TB, cfg bridge.Config, mount func(r *bridge.Router)) *bridge.Bridge {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	b, err := bridge.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if mount != nil {
		mount(b.Router())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v, want nil after cancel", err)
			}
		case <-time.After(waitLimit):
			t.Errorf("Run did not return after cancel")
		}
	})
	return b
}

// gate blocks handlers until the test opens it. Tests `defer g.open()`:
// deferred calls run before t.Cleanup stops the bridge, whose Run waits for
// handlers that ignore their ctx.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantFailure checks that resp is a failure with code.
func wantFailure(t testing.TB, resp protocol.ToolResponse, code string) {
	t.Helper()
	if resp.Success || resp.Error != code {
		t.Fatalf("response = %+v, want failure %q", resp, code)
	}
	if resp.Message == "" {
		t.Errorf("failure %q carries no message", code)
	}
}

// wantSuccess checks that resp succeeded with a result equal to want (as
// JSON).
func wantSuccess(t testing.TB, resp protocol.ToolResponse, want string) {
	t.Helper()
	if !resp.Success {
		t.Fatalf("response = %+v, want success", resp)
	}
	if !jsonEqual(t, resp.Result, json.RawMessage(want)) {
		t.Fatalf("result = %s, want %s", resp.Result, want)
	}
}

func jsonEqual(t testing.TB, a, b json.RawMessage) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON: %s", a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// recv waits for a value on ch.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
