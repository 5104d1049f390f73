//go:build !windows

package terminal_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/terminal"
)

// readUntil collects chunks from live until they contain each of want.
func readUntil(t *testing.T, live <-chan []byte, want ...string) string {
	t.Helper()
	var got bytes.Buffer
	timeout := time.After(5 * time.Second)
	for {
		done := true
		for _, w := range want {
			done = done && strings.Contains(got.String(), w)
		}
		if done {
			return got.String()
		}
		select {
		case b, ok := <-live:
			if !ok {
				t.Fatalf("stream closed; got %q", got.String())
			}
			got.Write(b)
		case <-timeout:
			t.Fatalf("stream lacks %q; got %q", want, got.String())
		}
	}
}

func TestAttachSubscriberSeesTheAgentsCommand(t *testing.T) {
	m := newManager(t, terminal.Config{})
	root := r0(t, m)
	_, live := m.Attach(t.Context())
	if r, _ := run(t, m, terminal.ExecRequest{Command: "echo hello-from-agent"}); !r.Success {
		t.Fatal(r)
	}
	got := readUntil(t, live, "tether:"+root+"$ echo hello-from-agent\r\n", "\r\nhello-from-agent\r\n")
	if strings.Contains(got, "633;D") || strings.Contains(got, "__tether") {
		t.Errorf("transcript shows tether's plumbing: %q", got)
	}
	// Hidden commands stay out of it.
	run(t, m, terminal.ExecRequest{Command: "echo secret-hidden", Hidden: true})
	run(t, m, terminal.ExecRequest{Command: "echo after-hidden"})
	if got := readUntil(t, live, "after-hidden\r\n"); strings.Contains(got, "secret-hidden") {
		t.Errorf("hidden command in the transcript: %q", got)
	}
}

func TestAttachSnapshotReplaysWhatCameBefore(t *testing.T) {
	m := newManager(t, terminal.Config{})
	run(t, m, terminal.ExecRequest{Command: "echo earlier"})
	snap, live := m.Attach(t.Context())
	if !strings.Contains(string(snap), "$ echo earlier\r\nearlier\r\n") {
		t.Errorf("snapshot %q", snap)
	}
	run(t, m, terminal.ExecRequest{Command: "echo later"})
	if got := readUntil(t, live, "later\r\n"); strings.Contains(got, "earlier") {
		t.Errorf("live stream repeats the snapshot: %q", got)
	}
}

func TestAttachEndsWithItsContext(t *testing.T) {
	m := newManager(t, terminal.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	_, live := m.Attach(ctx)
	cancel()
	for range live {
	}
}

func TestWriteTerminalTypesIntoTheVisibleShell(t *testing.T) {
	m := newManager(t, terminal.Config{})
	_, live := m.Attach(t.Context())
	if err := m.WriteTerminal(context.Background(), []byte("echo typed-by-$((6*7))\r")); err != nil {
		t.Fatal(err)
	}
	// The typed line is echoed into the transcript, then its output.
	readUntil(t, live, "echo typed-by-$((6*7))\r\n", "typed-by-42\r\n")
	// Once the person's line is done the agent gets the terminal back.
	testwait.Until(t, 2*time.Second, func() bool {
		r, _ := run(t, m, terminal.ExecRequest{Command: "true"})
		return r.Terminal == terminal.TerminalVisible
	}, "the terminal to be free")
}
