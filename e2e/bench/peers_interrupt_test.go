package bench

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// TestPeersInterruptStopsEveryChild interrupts BenchmarkPeers with SIGINT
// (what Ctrl-C sends) while it measures each system on two instances, and
// checks that it exits at once and leaves nothing behind: no process it
// started, nothing in their process groups, no file in its TMPDIR. `make bench-peers` runs it
// before the benchmark.
func TestPeersInterruptStopsEveryChild(t *testing.T) {
	if os.Getenv(peersEnv) != "1" {
		t.Skipf("%s is not 1: part of `make bench-peers`", peersEnv)
	}
	tetherBin(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sys := range peersDefaultSystems {
		t.Run(sys, func(t *testing.T) {
			pidFile := t.TempDir() + "/pids"
			tmp := t.TempDir() // the benchmark's TMPDIR: it must be left empty
			cmd := exec.Command(self, "-test.run=^$", "-test.bench=^BenchmarkPeers$", "-test.benchtime=1x")
			cmd.Env = append(os.Environ(), peersEnv+"=1", pidFileEnv+"="+pidFile, "TMPDIR="+tmp,
				"BENCH_PEERS_SYSTEMS="+sys, "BENCH_PEERS_TOPOLOGIES="+topoTwo, "BENCH_PEERS_CONC=1", "BENCH_PEERS_CONNS=4",
				"BENCH_PEERS_IDLE_CONNS=0", "BENCH_RUNS=1", "BENCH_DURATION=2m", "BENCH_WARMUP=0s",
				"BENCH_PEERS_OUT="+t.TempDir(), "BENCH_PEERS_BASELINE=", "BENCH_PEERS_DOC=", "BENCH_PEERS_TUNING=", "BENCH_PEERS_OTHER_BIN=")
			cmd.Stderr = os.Stderr
			cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{Setpgid: true}, syscall.SIGKILL)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			measuring := make(chan struct{})
			var read sync.WaitGroup
			read.Go(func() {
				sc := bufio.NewScanner(out)
				seen := false
				for sc.Scan() {
					if !seen && strings.HasPrefix(sc.Text(), "peers: measuring") {
						seen = true
						close(measuring)
					}
				}
			})
			exited := make(chan error, 1)
			go func() {
				read.Wait() // Wait closes stdout: read it all first
				exited <- cmd.Wait()
			}()
			select {
			case <-measuring:
			case err := <-exited:
				t.Fatalf("the benchmark exited before measuring: %v", err)
			case <-time.After(90 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
				t.Fatal("the benchmark did not start measuring within 90s")
			}
			pids := readPIDs(t, pidFile)
			if len(pids) < 3 { // at least Redis, two servers
				t.Fatalf("the benchmark recorded %d children, want its Redis, servers and clients: %v", len(pids), pids)
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGINT) {
					t.Errorf("after SIGINT the benchmark exited with %v, want status %d", err, 128+int(syscall.SIGINT))
				}
			case <-time.After(30 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
				t.Fatal("the benchmark did not exit within 30s of SIGINT")
			}
			for pid, name := range pids {
				if state, _, _, ok := procState(pid); ok && state != "Z" {
					t.Errorf("%s (pid %d) is still running after the benchmark exited", name, pid)
				}
				if left := groupMembers(pid); len(left) > 0 {
					t.Errorf("the process group of %s (pid %d) still holds %v", name, pid, left)
				}
			}
			if left := groupMembers(cmd.Process.Pid); len(left) > 0 {
				t.Errorf("the benchmark's own process group still holds %v", left)
			}
			if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
				t.Errorf("the benchmark left files in its TMPDIR: %v %v", left, err)
			}
		})
	}
}

// readPIDs reads the "pid name" lines pidFileEnv made the benchmark write.
func readPIDs(t *testing.T, path string) map[int]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the benchmark's pid file: %v", err)
	}
	pids := map[int]string{}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if pid, err := strconv.Atoi(f[0]); err == nil {
			pids[pid] = f[1]
		}
	}
	return pids
}
