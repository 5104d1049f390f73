//go:build !windows

package terminal_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/terminal"
)

// hostEnv makes this test binary a stand-in for a bridge: it starts
// commands with a Manager and waits to be killed (see runHost).
const hostEnv = "TETHER_TERMINAL_TEST_HOST"

// tagEnv marks the processes one test's host started, wherever they were
// reparented.
const tagEnv = "TETHER_TERMINAL_TEST_TAG"

// runHost runs when TestMain finds hostEnv: a Manager with a hidden
// command whose leader waits on a child, and a command in the visible
// shell; it prints "ready" and blocks until it is killed.
func runHost() {
	root, err := os.MkdirTemp("", "tether-host-")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	m, err := terminal.New(terminal.Config{Root: root})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for _, req := range []terminal.ExecRequest{
		{Command: "sleep 100; echo", Hidden: true, Mode: terminal.ModeAsync},
		{Command: "sleep 101", Mode: terminal.ModeAsync},
	} {
		if r, err := m.Execute(context.Background(), req); err != nil || r.Terminal != map[bool]string{true: terminal.TerminalHidden, false: terminal.TerminalVisible}[req.Hidden] {
			fmt.Println("error", r, err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	select {}
}

// tagged lists live processes other than skip whose environment has tag.
func tagged(tag string, skip int) []proc {
	want := []byte(tagEnv + "=" + tag + "\x00")
	var out []proc
	for _, p := range processes() {
		if p.pid == skip {
			continue
		}
		if env, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ"); err == nil && bytes.Contains(env, want) {
			out = append(out, p)
		}
	}
	return out
}

func TestNoCommandOutlivesAKilledHost(t *testing.T) {
	tag := rand.Text()
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), hostEnv+"=1", tagEnv+"="+tag)
	host.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Whatever happened, leave nothing behind.
		_ = host.Process.Kill()
		for _, p := range tagged(tag, 0) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		_ = host.Process.Kill()
		_ = host.Wait()
		t.Fatalf("the host said %q", line)
	}
	testwait.Until(t, 5*time.Second, func() bool {
		n := 0
		for _, p := range tagged(tag, host.Process.Pid) {
			if p.comm == "sleep" {
				n++
			}
		}
		return n == 2
	}, "both sleeps to run")
	if err := host.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = host.Wait()
	start := time.Now()
	testwait.Until(t, 2*time.Second, func() bool {
		return len(tagged(tag, 0)) == 0
	}, "every process the host started to end")
	t.Logf("nothing left %v after the host was killed", time.Since(start).Round(time.Millisecond))
}

func TestLeftoversInAnotherGroupOfTheSessionAreKilled(t *testing.T) {
	m := newManager(t, terminal.Config{})
	// set -m puts the background job in a process group of its own,
	// beyond kill(-leader).
	r, _ := run(t, m, terminal.ExecRequest{Command: "set -m; sleep 77 & echo $!", Hidden: true})
	pid, err := strconv.Atoi(string(bytes.TrimSpace([]byte(r.Output))))
	if err != nil {
		t.Fatalf("output %q", r.Output)
	}
	for _, p := range processes() {
		if p.pid == pid {
			t.Errorf("the background job %v outlived its command", p)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
