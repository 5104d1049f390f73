//go:build !windows

package e2e_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/podmantest"
)

// startPodman runs a podman service of the test's own (internal/podmantest:
// its own socket, storage and busybox image; nothing is pulled) for a
// bridge's --container-host. Without podman the test is skipped, but in
// CI, where make deps installed it, its absence fails the test, as in
// sandbox/container's TestMain.
//
// Its cleanup, which runs after the bridges' (registered later, so ended
// first: a bridge's shutdown removes its containers), fails the test if a
// container is left on the engine, then stops the service and fails it if
// a podman process or the engine's directory (its socket, its storage) is
// left.
func startPodman(t *testing.T) *podmantest.Engine {
	t.Helper()
	if err := podmantest.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the container runtime cannot be tested: %v", err)
		}
		t.Skipf("the container runtime cannot be tested: %v", err)
	}
	started := time.Now()
	eng, err := podmantest.Start()
	if err != nil {
		t.Fatalf("starting podman: %v", err)
	}
	t.Logf("podman service and image ready in %s", time.Since(started).Round(time.Millisecond))
	t.Cleanup(func() {
		if !t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			left, err := eng.Containers(ctx)
			cancel()
			if err != nil || len(left) > 0 {
				t.Errorf("containers left on the engine: %v (%v)", left, err)
			}
		}
		eng.Close()
		if left := eng.Processes(); len(left) > 0 {
			t.Errorf("podman processes left behind: %v", left)
		}
		if _, err := os.Stat(eng.Dir()); !os.IsNotExist(err) {
			t.Errorf("the engine's directory %s (its socket) is left: %v", eng.Dir(), err)
		}
	})
	return eng
}

// containerOf is the name of sandbox workspace id's container on eng
// (tether-{root hash}-{id}), or "" when the engine lists none.
func containerOf(t *testing.T, eng *podmantest.Engine, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names, err := eng.Containers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "-"+id) {
			return n
		}
	}
	return ""
}
