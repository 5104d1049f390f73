package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/internal/leakcheck"
	"github.com/tetherdev/tether/internal/testproc"
)

// TestMain stops every process the run started on Ctrl-C, and fails the
// run if it passed but left a goroutine, a descriptor or a process behind.
func TestMain(m *testing.M) {
	leaks := leakcheck.Begin()
	remove := testproc.OnInterrupt("chaos", nil)
	code := m.Run()
	remove()
	os.Exit(leaks.After(code))
}

// TestChaos is the chaos run (doc.go): in `make test` its short
// configuration, in `make chaos` whatever the CHAOS_* knobs say.
func TestChaos(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	bin := testproc.TetherBin(t)
	clients := testproc.NodeClients(t)
	dir := cfg.out
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tether-chaos-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("logs, fault log and summary kept in %s", dir)
				return
			}
			_ = os.RemoveAll(dir)
		})
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	redisSrv := redistest.Start(t)
	r := newRun(cfg, nil)
	topo, err := newTopology(cfg, bin, dir, clients, redisSrv, r)
	if topo != nil {
		t.Cleanup(func() {
			if err := topo.stopAll(); err != nil {
				t.Errorf("stopping the run's processes: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("starting the topology: %v", err)
	}
	r.topo = topo
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = r.connectCallers(ctx)
	t.Cleanup(r.closeCallers)
	if err != nil {
		t.Fatal(err)
	}

	t.Logf("chaos: %s; logs in %s", cfg, dir)
	r.start = time.Now()
	stop := make(chan struct{})
	injected := make(chan struct{})
	go func() {
		defer close(injected)
		var wg sync.WaitGroup
		wg.Go(func() { r.watchHost(stop) })
		r.injectFaults(stop)
		wg.Wait()
	}()
	r.callLoop()
	stopped := time.Now()
	close(stop)
	<-injected // every fault has healed (or failed to) by now
	took := stopped.Sub(r.start)

	r.awaitCancels(2 * time.Second)
	v := r.check(stopped)
	var out bytes.Buffer
	r.report(&out, v, took)
	fmt.Fprintf(&out, "  wall time %s, load average %s\n", time.Since(r.start).Round(time.Second), loadAverage())
	_ = os.WriteFile(filepath.Join(dir, "summary.txt"), out.Bytes(), 0o644)
	_ = r.writeFaultLog(filepath.Join(dir, "faults.log"))
	t.Log("\n" + out.String())
	if testing.Verbose() || cfg.out != "" {
		fmt.Println(out.String())
	}
	r.mu.Lock()
	n := len(r.violations)
	r.mu.Unlock()
	if n > 0 {
		t.Errorf("%d violations of tether's promises (above)", n)
	}
	if len(r.records) == 0 || v.clean == 0 || len(r.faults.all()) == 0 {
		t.Errorf("the run proved nothing: %d calls, %d clean, %d faults", len(r.records), v.clean, len(r.faults.all()))
	}
}

// loadAverage is /proc/loadavg's first three figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := bytes.Fields(b)
	if len(f) < 3 {
		return "?"
	}
	return string(bytes.Join(f[:3], []byte(" ")))
}
