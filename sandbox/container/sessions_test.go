//go:build !windows

package container_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

func (e *env) startAsync(id, command string) string {
	e.t.Helper()
	res, err := e.svc.Exec(context.Background(), id, sandbox.ExecRequest{Command: command, Mode: sandbox.ExecAsync})
	if err != nil || res.SessionID == "" {
		e.t.Fatalf("async exec %q: %+v %v", command, res, err)
	}
	return res.SessionID
}

func (e *env) output(id, sid string, offset int64) protocol.SessionOutput {
	e.t.Helper()
	out, err := e.svc.SessionOutput(context.Background(), id, sid, protocol.SessionOutputRequest{Offset: offset})
	if err != nil {
		e.t.Fatalf("output of %s from %d: %v", sid, offset, err)
	}
	return out
}

// awaitOutput polls from offset until want is there, as a client does.
func (e *env) awaitOutput(id, sid string, offset int64, want string) protocol.SessionOutput {
	e.t.Helper()
	var got protocol.SessionOutput
	eventually(e.t, want+" in the output", func() bool {
		got = e.output(id, sid, offset)
		return len(got.Output) >= len(want)
	})
	if got.Output != want {
		e.t.Fatalf("output at %d = %q, want %q", offset, got.Output, want)
	}
	return got
}

func (e *env) awaitEnd(id, sid string, offset int64) protocol.SessionOutput {
	e.t.Helper()
	var got protocol.SessionOutput
	eventually(e.t, "the session's end", func() bool {
		got = e.output(id, sid, offset)
		return !got.Running
	})
	return got
}

// ps lists the container's processes, from the engine's side.
func (e *env) ps(id string) string {
	e.t.Helper()
	out, err := engine.Podman(context.Background(), "exec", e.containerOf(id), "ps")
	if err != nil {
		e.t.Fatalf("ps: %v", err)
	}
	return out
}

func TestSessionInTheContainerIsReadByOffsetAndTakesStdin(t *testing.T) {
	e := newEnv(t, nil)
	id := e.acquire(sandbox.ModeEdit, nil).WorkspaceID
	ctx := context.Background()
	sid := e.startAsync(id, "echo first; read line; echo \"second $line\"; exit 3")
	first := e.awaitOutput(id, sid, 0, "first\n")
	if !first.Running || first.NextOffset != 6 {
		t.Fatalf("first chunk: %+v", first)
	}
	if _, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: "fed\n"}); err != nil {
		t.Fatal(err)
	}
	end := e.awaitEnd(id, sid, first.NextOffset)
	if end.Output != "second fed\n" || end.ExitCode == nil || *end.ExitCode != 3 || end.EndedBy != "" {
		t.Fatalf("last chunk: %+v", end)
	}
	// cat echoes what it is fed, and ends at eof.
	sid = e.startAsync(id, "cat")
	if _, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: "hello\n"}); err != nil {
		t.Fatal(err)
	}
	e.awaitOutput(id, sid, 0, "hello\n")
	if _, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: "bye\n", EOF: true}); err != nil {
		t.Fatal(err)
	}
	if end := e.awaitEnd(id, sid, 6); end.Output != "bye\n" || *end.ExitCode != 0 {
		t.Fatalf("cat after eof: %+v", end)
	}
}

func TestSessionSignalEndsTheSleepTreeInTheContainer(t *testing.T) {
	e := newEnv(t, nil)
	id := e.acquire(sandbox.ModeEdit, nil).WorkspaceID
	sid := e.startAsync(id, "sleep 311 & sleep 312 & echo started; wait")
	e.awaitOutput(id, sid, 0, "started\n")
	eventually(t, "the sleeps run", func() bool { return strings.Contains(e.ps(id), "sleep 312") })
	res, err := e.svc.SessionSignal(context.Background(), id, sid, protocol.SessionSignalRequest{Signal: "INT"})
	if err != nil || res.Signal != "SIGINT" {
		t.Fatalf("signal: %+v %v", res, err)
	}
	end := e.awaitEnd(id, sid, 8)
	if end.ExitCode == nil || *end.ExitCode != 128+2 || end.EndedBy != "" {
		t.Fatalf("an INTed session: %+v", end)
	}
	if ps := e.ps(id); strings.Contains(ps, "sleep 31") {
		t.Fatalf("a sleep survived the signal:\n%s", ps)
	}
}

func TestReleaseEndsTheContainersSessions(t *testing.T) {
	e := newEnv(t, nil)
	id := e.acquire(sandbox.ModeEdit, nil).WorkspaceID
	sid := e.startAsync(id, "echo started; sleep 321")
	e.awaitOutput(id, sid, 0, "started\n")
	if err := e.svc.Release(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	end := e.output(id, sid, 0)
	if end.Running || end.EndedBy != protocol.CodeRuntimeStopped {
		t.Fatalf("a session after release: %+v", end)
	}
	if name := e.containerOf(id); name != "" {
		t.Fatalf("the container %s outlived release", name)
	}
}

func TestKilledContainerEndsItsSessionsWithRuntimeStopped(t *testing.T) {
	e := newEnv(t, nil)
	id := e.acquire(sandbox.ModeEdit, nil).WorkspaceID
	ctx := context.Background()
	sid := e.startAsync(id, "echo started; sleep 331")
	e.awaitOutput(id, sid, 0, "started\n")
	if _, err := engine.Podman(ctx, "kill", e.containerOf(id)); err != nil {
		t.Fatal(err)
	}
	end := e.awaitEnd(id, sid, 0)
	if end.EndedBy != protocol.CodeRuntimeStopped || !strings.Contains(end.Error, "exit status 137") || end.Output != "started\n" {
		t.Fatalf("a session in a killed container: %+v", end)
	}
	_, err := e.svc.SessionSignal(ctx, id, sid, protocol.SessionSignalRequest{Signal: "KILL"})
	wantCode(t, err, protocol.CodeSessionEnded)
	// The next session gets a fresh container.
	sid = e.startAsync(id, "echo again")
	if end := e.awaitEnd(id, sid, 0); end.Output != "again\n" || *end.ExitCode != 0 {
		t.Fatalf("after the kill: %+v", end)
	}
}

// A tty session runs on the engine's terminal: the program sees one, its
// input is echoed, Ctrl-D (eof) ends cat, and a signal reaches its group.
func TestTTYSessionInTheContainer(t *testing.T) {
	e := newEnv(t, nil)
	id := e.acquire(sandbox.ModeEdit, nil).WorkspaceID
	ctx := context.Background()
	res, err := e.svc.Exec(ctx, id, sandbox.ExecRequest{Mode: sandbox.ExecAsync, TTY: true,
		Command: "test -t 0 && test -t 1 && echo on-a-tty; cat"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	head := e.awaitOutput(id, sid, 0, "on-a-tty\r\n")
	if _, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: "hi\n", EOF: true}); err != nil {
		t.Fatal(err)
	}
	end := e.awaitEnd(id, sid, head.NextOffset)
	if !strings.HasPrefix(end.Output, "hi\r\nhi\r\n") || end.ExitCode == nil || *end.ExitCode != 0 {
		t.Fatalf("after the input: %+v", end)
	}
	res, err = e.svc.Exec(ctx, id, sandbox.ExecRequest{Mode: sandbox.ExecAsync, TTY: true, Command: "echo started; sleep 341"})
	if err != nil {
		t.Fatal(err)
	}
	e.awaitOutput(id, res.SessionID, 0, "started\r\n")
	if _, err := e.svc.SessionSignal(ctx, id, res.SessionID, protocol.SessionSignalRequest{Signal: "TERM"}); err != nil {
		t.Fatal(err)
	}
	if end := e.awaitEnd(id, res.SessionID, 0); end.ExitCode == nil || *end.ExitCode != 128+15 {
		t.Fatalf("a TERMed tty session: %+v", end)
	}
	if ps := e.ps(id); strings.Contains(ps, "sleep 341") {
		t.Fatalf("the sleep survived:\n%s", ps)
	}
}

// An input the command did not read in time leaves the session's stdin
// open for the next: once the command reads, the next input goes through
// (sandbox.WriteInput clears the deadline that ended the first).
func TestSessionInputInTheContainerAfterAnInputThatTimedOut(t *testing.T) {
	e := newEnv(t, nil)
	id := e.acquire(sandbox.ModeEdit, nil).WorkspaceID
	// It reads nothing until the file "go" appears, then keeps the last
	// line of its input.
	sid := e.startAsync(id, "while [ ! -e go ]; do sleep 0.02; done; tail -n 1")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// More than the engine's connection and the exec's pipe hold, so the
	// write waits.
	_, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: strings.Repeat("x", 8<<20)})
	if err == nil || !strings.Contains(err.Error(), "in time") {
		t.Fatalf("an input nobody read: %v", err)
	}
	st, err := e.svc.WorkspaceStatus(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.Path, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := e.svc.SessionInput(context.Background(), id, sid, protocol.SessionInputRequest{Data: "\nafter\n", EOF: true})
	if err != nil || in.Bytes != 7 {
		t.Fatalf("the input after one that timed out: %+v %v", in, err)
	}
	if end := e.awaitEnd(id, sid, 0); end.Output != "after\n" || end.ExitCode == nil || *end.ExitCode != 0 {
		t.Fatalf("after the input: %+v", end)
	}
}
