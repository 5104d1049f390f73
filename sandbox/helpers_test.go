//go:build !windows

package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/internal/gittest"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// gitT runs git for test setup and fails the test on error.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return gittest.Run(t, dir, args...)
}

// makeOrigin creates a bare repository served by path, with a main
// branch holding files (and a feature branch), and returns its path.
func makeOrigin(t testing.TB, files map[string]string) string {
	t.Helper()
	if files == nil {
		files = map[string]string{
			"README.md":   "# demo\n",
			"main.go":     "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
			"lib/util.go": "package lib\n\n// Answer is the answer.\nconst Answer = 42\n",
		}
	}
	src := gittest.Repo(t, files)
	gitT(t, src, "branch", "feature")
	origin := filepath.Join(t.TempDir(), "origin.git")
	gitT(t, src, "clone", "-q", "--bare", src, origin)
	return origin
}

// fakeClock is a settable clock (a fake: real time cannot be advanced
// by days in a test).
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	t    *testing.T
	svc  *sandbox.Service
	root string
	logs *syncBuffer
	cfg  sandbox.Config
}

// newEnv opens a Service on a fresh root; mod adjusts the config.
func newEnv(t *testing.T, mod func(*sandbox.Config)) *env {
	t.Helper()
	e := &env{t: t, root: t.TempDir(), logs: &syncBuffer{}}
	e.cfg = sandbox.Config{Root: e.root, Logger: zerolog.New(e.logs).Level(zerolog.DebugLevel)}
	if mod != nil {
		mod(&e.cfg)
	}
	e.open()
	t.Cleanup(func() {
		if e.svc != nil {
			_ = e.svc.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	svc, err := sandbox.New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.svc = svc
}

// restart closes the Service and opens a new one on the same root, as a
// bridge restart does.
func (e *env) restart() {
	e.t.Helper()
	if err := e.svc.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.open()
}

func (e *env) acquire(req sandbox.AcquireRequest) sandbox.AcquireResult {
	e.t.Helper()
	res, err := e.svc.AcquireWorkspace(context.Background(), req)
	if err != nil {
		e.t.Fatalf("acquire %+v: %v", req, err)
	}
	return res
}

func editReq(origin, conv string) sandbox.AcquireRequest {
	return sandbox.AcquireRequest{Repo: origin, Mode: sandbox.ModeEdit, UserID: "u1", ProjectID: "p1", ConversationID: conv}
}

// codeOf returns the protocol error code of err, or "" for none.
func codeOf(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := codeOf(err); got != code {
		t.Fatalf("want error code %q, got %q (err: %v)", code, got, err)
	}
}

// countingCache wraps the real LocalGit to count clones.
type countingCache struct {
	sandbox.RepoCache
	mu     sync.Mutex
	clones int
}

func (c *countingCache) Ensure(ctx context.Context, repo sandbox.Repo, auth string) (bool, error) {
	cloned, err := c.RepoCache.Ensure(ctx, repo, auth)
	if cloned {
		c.mu.Lock()
		c.clones++
		c.mu.Unlock()
	}
	return cloned, err
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
