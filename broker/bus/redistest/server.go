// Package redistest starts real redis-server processes for tests: a single
// server (Start, or StartTLS for one that speaks TLS only), a Redis Cluster
// (StartCluster) and a TCP proxy that can make connections go silently dead
// (StartProxy).
//
// Every server listens on a free loopback port, keeps nothing on disk
// (--save "" --appendonly no) and is killed, and waited for, in t.Cleanup.
// Tests that share a server isolate themselves with a unique key prefix.
//
// When redis-server is not installed the calling test is skipped, unless the
// environment variable CI is set: then it fails, so that a broken setup
// cannot pass silently.
//
// All functions must be called from the test's goroutine (they may call
// t.Fatal). The methods of Server, Cluster and Proxy are safe for concurrent
// use unless their doc says otherwise.
package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// startWait bounds how long a redis-server may take to answer PING.
const startWait = 15 * time.Second

// stopWait bounds how long a redis-server may take to exit after SIGTERM
// before it is killed.
const stopWait = 5 * time.Second

// Require returns the path of redis-server. It skips t when the binary is
// missing, or fails t when the environment variable CI is set.
func Require(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("redis-server not found and CI is set: %v (install the Debian package redis-server)", err)
	}
	t.Skipf("redis-server not found (%v): install the Debian package redis-server; with CI set this is a failure", err)
	return ""
}

// Server is one redis-server process on 127.0.0.1.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	port    int
	extra   []string // arguments added by the cluster
	logPath string
	tls     *TLS   // nil: plaintext on port
	sock    string // a TLS server's plaintext unix socket, for Do and the start check

	mu   sync.Mutex
	proc *process // nil while stopped
}

type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
}

// Start starts a redis-server on a free loopback port and waits until it
// answers PING. The server is stopped in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil, false)
}

// TLS is how StartTLS's server speaks TLS: its certificate, its key and
// the CA its clients' certificates must be signed by, in PEM files (the
// test makes them). Debian's redis-server is built with TLS.
type TLS struct {
	CertFile, KeyFile, CAFile string
	// AuthClients makes a client certificate required (tls-auth-clients
	// yes); without it none is asked for (no).
	AuthClients bool
}

// StartTLS starts a redis-server that speaks TLS only on a free loopback
// port (--port 0 --tls-port P), as a TLS-only production Redis does, and
// waits until it answers PING. Do reaches it through a plaintext unix
// socket of its own, so the test needs no client certificate to inspect
// it. The server is stopped in t.Cleanup.
func StartTLS(t testing.TB, cfg TLS) *Server {
	t.Helper()
	return startServer(t, nil, false, &cfg)
}

func start(t testing.TB, extra []string, busPort bool) *Server {
	t.Helper()
	return startServer(t, extra, busPort, nil)
}

func startServer(t testing.TB, extra []string, busPort bool, tlsCfg *TLS) *Server {
	t.Helper()
	bin := Require(t)
	dir := t.TempDir()
	sock := ""
	if tlsCfg != nil {
		// A unix socket's path is short (108 bytes): not under a test's
		// long temporary directory.
		sockDir, err := os.MkdirTemp("", "redistest")
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
		sock = filepath.Join(sockDir, "redis.sock")
	}
	var lastErr error
	for range 5 {
		port, err := freePort(busPort)
		if err != nil {
			t.Fatalf("redistest: finding a free port: %v", err)
		}
		s := &Server{
			t: t, bin: bin, dir: dir, port: port, extra: extra, tls: tlsCfg, sock: sock,
			logPath: filepath.Join(dir, fmt.Sprintf("redis-%d.log", port)),
		}
		if lastErr = s.launch(); lastErr == nil {
			t.Cleanup(s.cleanup)
			return s
		}
		// Most likely somebody took the port between our probe and redis's
		// bind; try another one.
	}
	t.Fatalf("redistest: starting redis-server: %v", lastErr)
	return nil
}

// Addr returns host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns the server's redis:// URL, rediss:// for a TLS server.
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// Port returns the server's port; it stays the same across Restart.
func (s *Server) Port() int { return s.port }

// Pid returns the server process's id, or 0 while it is stopped (the
// benchmarks count its CPU time).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Do runs one command against the server; see the function Do. A TLS
// server is asked through its plaintext unix socket.
func (s *Server) Do(args ...string) (string, error) {
	return s.do(5*time.Second, args...)
}

func (s *Server) do(timeout time.Duration, args ...string) (string, error) {
	if s.sock != "" {
		return do("unix", s.sock, timeout, args...)
	}
	return do("tcp", s.Addr(), timeout, args...)
}

// Stop stops the server (SIGTERM, then SIGKILL after a few seconds) and
// waits for it to exit. Clients see their connections closed. Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.stop()
	s.proc = nil
}

// Restart stops the server if it runs and starts it again on the same port,
// empty (nothing is persisted). It fails the test if the server does not
// come back.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	if s.proc != nil {
		s.proc.stop()
		s.proc = nil
	}
	s.mu.Unlock()
	// The port may be briefly unavailable; keep trying for a while.
	deadline := time.Now().Add(startWait)
	for {
		err := s.launch()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: restarting redis-server on port %d: %v", s.port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// RestartWithoutTLS restarts a TLS server (StartTLS) on the same port as a
// plaintext one, as an operator who dropped its TLS settings would: the
// clients that dial it with rediss:// now meet a Redis that speaks
// plaintext. Do then uses TCP.
func (s *Server) RestartWithoutTLS() {
	s.t.Helper()
	s.mu.Lock()
	if s.proc != nil {
		s.proc.stop()
		s.proc = nil
	}
	s.tls, s.sock = nil, ""
	s.mu.Unlock()
	s.Restart()
}

func (s *Server) launch() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening log file: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--loglevel", "notice",
	}
	if s.tls != nil {
		auth := "no"
		if s.tls.AuthClients {
			auth = "yes"
		}
		args[1] = "0" // no plaintext TCP port
		args = append(args, "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", s.tls.CertFile, "--tls-key-file", s.tls.KeyFile,
			"--tls-ca-cert-file", s.tls.CAFile, "--tls-auth-clients", auth,
			"--unixsocket", s.sock, "--unixsocketperm", "700")
	}
	args = append(args, s.extra...)
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout = logf // *os.File: no copying goroutine
	cmd.Stderr = logf
	// Do not outlive a test binary that dies without running its cleanups.
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{}, syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { // owned by p: ends when the process exits, awaited by stop
		_ = cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(startWait)
	for {
		reply, err := s.do(time.Second, "PING")
		if err == nil && reply == "PONG" {
			break
		}
		select {
		case <-p.exited:
			return fmt.Errorf("redis-server on port %d exited: %s", s.port, s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return fmt.Errorf("redis-server on port %d did not answer PING within %v (last: %q, %v): %s",
				s.port, startWait, reply, err, s.logTail())
		}
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(stopWait):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (s *Server) cleanup() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		_ = p.cmd.Process.Kill() // nothing to keep: no need to be graceful
		<-p.exited
	}
	if s.t.Failed() {
		s.t.Logf("redistest: log of redis-server on port %d:\n%s", s.port, s.logTail())
	}
}

// logTail returns the end of the server's log, for failure messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}

// freePort returns a loopback port nobody listens on. With busPort it also
// makes sure port+10000 (the Redis Cluster bus port) is free.
func freePort(busPort bool) (int, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if !busPort {
			_ = ln.Close()
			return port, nil
		}
		if port+10000 > 65535 {
			_ = ln.Close()
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		_ = ln.Close()
		if err != nil {
			continue
		}
		_ = bus.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair found")
}
