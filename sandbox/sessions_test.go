//go:build !windows

package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/sandbox"
)

// The async sessions run on every host runtime: each test runs for
// subprocess and for bwrap (skipped where bwrap cannot run, failed in CI).
func forHostRuntimes(t *testing.T, f func(t *testing.T, e *env, id string)) {
	for _, rt := range []string{"subprocess", "bwrap"} {
		t.Run(rt, func(t *testing.T) {
			if rt == "bwrap" {
				requireBwrap(t)
			}
			origin := makeOrigin(t, nil)
			e := newEnv(t, func(c *sandbox.Config) { c.MaxSessions = 2 })
			req := editReq(origin, "sess")
			req.Runtime = rt
			f(t, e, e.acquire(req).WorkspaceID)
		})
	}
}

func startAsync(t *testing.T, e *env, id, command string) string {
	t.Helper()
	res, err := e.svc.Exec(context.Background(), id, sandbox.ExecRequest{Command: command, Mode: sandbox.ExecAsync})
	if err != nil {
		t.Fatalf("async exec %q: %v", command, err)
	}
	if !res.Success || res.SessionID == "" || res.Status != sandbox.SessionRunning {
		t.Fatalf("async exec %q answered %+v", command, res)
	}
	return res.SessionID
}

func output(t *testing.T, e *env, id, sid string, offset int64) protocol.SessionOutput {
	t.Helper()
	out, err := e.svc.SessionOutput(context.Background(), id, sid, protocol.SessionOutputRequest{Offset: offset})
	if err != nil {
		t.Fatalf("output of %s from %d: %v", sid, offset, err)
	}
	return out
}

// awaitOutput polls from offset until the session has written want
// there (the poll a client makes), and returns that chunk.
func awaitOutput(t *testing.T, e *env, id, sid string, offset int64, want string) protocol.SessionOutput {
	t.Helper()
	var got protocol.SessionOutput
	testwait.Until(t, 10*time.Second, func() bool {
		got = output(t, e, id, sid, offset)
		return len(got.Output) >= len(want)
	}, "%q at offset %d of %s", want, offset, sid)
	if got.Output != want {
		t.Fatalf("output at %d = %q, want %q", offset, got.Output, want)
	}
	return got
}

// awaitEnd polls until the session has ended and returns its last chunk
// from offset.
func awaitEnd(t *testing.T, e *env, id, sid string, offset int64) protocol.SessionOutput {
	t.Helper()
	var got protocol.SessionOutput
	testwait.Until(t, 10*time.Second, func() bool {
		got = output(t, e, id, sid, offset)
		return !got.Running
	}, "session %s to end", sid)
	if got.ExitCode == nil {
		t.Fatalf("ended session %s has no exit code: %+v", sid, got)
	}
	return got
}

// procsWith lists the live processes whose command line has arg, the
// unique sleep length a test gives its command's tree.
func procsWith(arg string) []int {
	names, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil || !bytes.Contains(b, []byte("\x00"+arg+"\x00")) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Split(n, "/")[2])
		if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

func TestSessionOutputIsReadByOffsetWhileItRuns(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		sid := startAsync(t, e, id, "echo first; read line; echo \"second $line\"; echo oops >&2; exit 3")
		first := awaitOutput(t, e, id, sid, 0, "first\n")
		if !first.Running || first.ExitCode != nil || first.NextOffset != 6 || first.Offset != 0 || first.Missed != 0 {
			t.Fatalf("first chunk: %+v", first)
		}
		// Nothing new yet: an empty chunk at the same offset.
		if again := output(t, e, id, sid, first.NextOffset); again.Output != "" || again.NextOffset != 6 || !again.Running {
			t.Fatalf("chunk with nothing new: %+v", again)
		}
		in, err := e.svc.SessionInput(context.Background(), id, sid, protocol.SessionInputRequest{Data: "fed\n"})
		if err != nil || in.Bytes != 4 || in.SessionID != sid {
			t.Fatalf("input: %+v %v", in, err)
		}
		end := awaitEnd(t, e, id, sid, first.NextOffset)
		if end.Output != "second fed\noops\n" || *end.ExitCode != 3 || end.EndedBy != "" {
			t.Fatalf("last chunk: %+v", end)
		}
		// An ended session keeps its output, from any offset.
		if all := output(t, e, id, sid, 0); all.Output != "first\nsecond fed\noops\n" {
			t.Fatalf("whole output after the end: %q", all.Output)
		}
		list := must[sandbox.SessionsResult](t)(e.svc.Sessions(context.Background(), id, struct{}{}))
		if len(list.Sessions) != 1 || list.Sessions[0].Status != sandbox.SessionExited || *list.Sessions[0].ExitCode != 3 || list.Sessions[0].OutputBytes != 22 {
			t.Fatalf("sessions: %+v", list)
		}
		_, err = e.svc.SessionInput(context.Background(), id, sid, protocol.SessionInputRequest{Data: "late"})
		wantCode(t, err, protocol.CodeSessionEnded)
	})
}

func TestSessionStdinFeedsCatUntilEOF(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		ctx := context.Background()
		sid := startAsync(t, e, id, "cat")
		for _, chunk := range []string{"hello ", "world\n"} {
			if _, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: chunk}); err != nil {
				t.Fatal(err)
			}
		}
		awaitOutput(t, e, id, sid, 0, "hello world\n")
		if _, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: "bye\n", EOF: true}); err != nil {
			t.Fatal(err)
		}
		end := awaitEnd(t, e, id, sid, 12)
		if end.Output != "bye\n" || *end.ExitCode != 0 {
			t.Fatalf("after eof: %+v", end)
		}
		// stdin given with the exec is the whole input.
		res := must[sandbox.ExecResult](t)(e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "cat", Mode: sandbox.ExecAsync, Stdin: "given\n"}))
		if end := awaitEnd(t, e, id, res.SessionID, 0); end.Output != "given\n" || *end.ExitCode != 0 {
			t.Fatalf("exec stdin: %+v", end)
		}
	})
}

// An input the command did not read before the call ended leaves the
// session's stdin open for the next: once the command reads, the next
// input goes through.
func TestSessionInputAfterAnInputThatTimedOut(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		// It reads nothing until the file "go" appears, then keeps the
		// last line of its input.
		sid := startAsync(t, e, id, "while [ ! -e go ]; do sleep 0.02; done; tail -n 1")
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		// More than a pipe or a terminal holds, so the write waits.
		_, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: strings.Repeat("x", 1<<20)})
		if err == nil || !strings.Contains(err.Error(), "in time") {
			t.Fatalf("an input nobody read: %v", err)
		}
		st := must[sandbox.WorkspaceStatus](t)(e.svc.WorkspaceStatus(context.Background(), id))
		if err := os.WriteFile(filepath.Join(st.Path, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := e.svc.SessionInput(context.Background(), id, sid, protocol.SessionInputRequest{Data: "\nafter\n", EOF: true})
		if err != nil || in.Bytes != 7 {
			t.Fatalf("the input after one that timed out: %+v %v", in, err)
		}
		end := awaitEnd(t, e, id, sid, 0)
		if end.Output != "after\n" || *end.ExitCode != 0 {
			t.Fatalf("after the input: %+v", end)
		}
	})
}

func TestSessionSignalEndsTheSleepTree(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		ctx := context.Background()
		sid := startAsync(t, e, id, "sleep 2718.1 & sleep 2718.1 & echo started; wait")
		awaitOutput(t, e, id, sid, 0, "started\n")
		testwait.Until(t, 5*time.Second, func() bool { return len(procsWith("2718.1")) == 2 }, "two sleeps")
		res, err := e.svc.SessionSignal(ctx, id, sid, protocol.SessionSignalRequest{Signal: "term"})
		if err != nil || res.Signal != "SIGTERM" {
			t.Fatalf("signal: %+v %v", res, err)
		}
		end := awaitEnd(t, e, id, sid, 8)
		if *end.ExitCode != 128+15 {
			t.Fatalf("a TERMed shell's status: %+v", end)
		}
		if left := procsWith("2718.1"); len(left) != 0 {
			t.Fatalf("the sleeps outlived the signal: %v", left)
		}
		_, err = e.svc.SessionSignal(ctx, id, sid, protocol.SessionSignalRequest{Signal: "KILL"})
		wantCode(t, err, protocol.CodeSessionEnded)
	})
}

// A command ended by a signal has the status a shell gives it, 128+n, in
// a sync exec as in a session, on every runtime.
func TestSignalledCommandExitsWith128PlusTheSignal(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		res := must[sandbox.ExecResult](t)(e.svc.Exec(context.Background(), id, sandbox.ExecRequest{Command: "kill -TERM $$"}))
		if res.ExitCode != 128+15 || res.Success || res.TimedOut {
			t.Fatalf("sync: %+v", res)
		}
		sid := startAsync(t, e, id, "kill -TERM $$")
		if end := awaitEnd(t, e, id, sid, 0); *end.ExitCode != 128+15 {
			t.Fatalf("session: %+v", end)
		}
	})
}

func TestReleaseEndsLiveSessions(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		ctx := context.Background()
		sid := startAsync(t, e, id, "sleep 3141.5 & echo started; sleep 3141.5")
		awaitOutput(t, e, id, sid, 0, "started\n")
		if err := e.svc.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
		// Release answers once its sessions have ended.
		end := output(t, e, id, sid, 0)
		if end.Running || end.EndedBy != protocol.CodeRuntimeStopped || !strings.Contains(end.Error, "stopped") {
			t.Fatalf("a session after release: %+v", end)
		}
		if left := procsWith("3141.5"); len(left) != 0 {
			t.Fatalf("processes outlived release: %v", left)
		}
		// The next command starts the runtime again.
		sid = startAsync(t, e, id, "echo again")
		if end := awaitEnd(t, e, id, sid, 0); end.Output != "again\n" || *end.ExitCode != 0 {
			t.Fatalf("after release: %+v", end)
		}
	})
}

// A command that reaches the Service after Close (a bridge's handler
// still running as the bridge shuts down) starts nothing: no runtime and
// no session, which nothing would end any more.
func TestNoCommandStartsAfterClose(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		if err := e.svc.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := e.svc.Exec(context.Background(), id, sandbox.ExecRequest{Command: "sleep 2236.07", Mode: sandbox.ExecAsync})
		if !errors.Is(err, sandbox.ErrClosed) {
			t.Fatalf("an async exec after Close: %v", err)
		}
		res, err := e.svc.Exec(context.Background(), id, sandbox.ExecRequest{Command: "echo ran"})
		if !errors.Is(err, sandbox.ErrClosed) {
			t.Fatalf("a sync exec after Close: %+v %v", res, err)
		}
		if left := procsWith("2236.07"); len(left) != 0 {
			t.Fatalf("a session started after Close: %v", left)
		}
	})
}

func TestSessionEndKillsAndAnswersTheEnd(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		sid := startAsync(t, e, id, "sleep 1414.2")
		testwait.Until(t, 5*time.Second, func() bool { return len(procsWith("1414.2")) == 1 }, "the sleep")
		in := must[sandbox.SessionInfo](t)(e.svc.SessionEnd(context.Background(), id, sid, struct{}{}))
		if in.Status != sandbox.SessionExited || in.ExitCode == nil || *in.ExitCode != 128+9 {
			t.Fatalf("ended: %+v", in)
		}
		if left := procsWith("1414.2"); len(left) != 0 {
			t.Fatalf("the sleep outlived end: %v", left)
		}
	})
}

func TestSessionTimeoutKillsItsTree(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		res := must[sandbox.ExecResult](t)(e.svc.Exec(context.Background(), id, sandbox.ExecRequest{Command: "sleep 1234.5 & sleep 1234.5", Mode: sandbox.ExecAsync, Timeout: 0.3}))
		end := awaitEnd(t, e, id, res.SessionID, 0)
		if !end.TimedOut || *end.ExitCode != 128+9 {
			t.Fatalf("a timed out session: %+v", end)
		}
		if left := procsWith("1234.5"); len(left) != 0 {
			t.Fatalf("the sleeps outlived the timeout: %v", left)
		}
	})
}

func TestSessionsAreBoundedPerWorkspace(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		ctx := context.Background()
		a, b := startAsync(t, e, id, "cat"), startAsync(t, e, id, "cat")
		_, err := e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "cat", Mode: sandbox.ExecAsync})
		wantCode(t, err, protocol.CodeOverloaded)
		// An ended one frees its place.
		must[sandbox.SessionInfo](t)(e.svc.SessionEnd(ctx, id, a, struct{}{}))
		c := startAsync(t, e, id, "cat")
		for _, sid := range []string{b, c} {
			must[sandbox.SessionInfo](t)(e.svc.SessionEnd(ctx, id, sid, struct{}{}))
		}
	})
}

func TestSessionBadInputNamesTheField(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	ctx := context.Background()
	id := e.acquire(editReq(origin, "bad")).WorkspaceID
	_, err := e.svc.Exec(ctx, id, sandbox.ExecRequest{Command: "true", Mode: "later"})
	wantCode(t, err, protocol.CodeInvalidPayload)
	if !strings.Contains(err.Error(), "mode") {
		t.Fatalf("bad mode: %v", err)
	}
	_, err = e.svc.SessionOutput(ctx, id, "sx-nope", protocol.SessionOutputRequest{})
	wantCode(t, err, protocol.CodeSessionNotFound)
	if !strings.Contains(err.Error(), "session_id") || !strings.Contains(err.Error(), "sx-nope") {
		t.Fatalf("unknown session: %v", err)
	}
	_, err = e.svc.SessionOutput(ctx, "ws-nope", "sx-nope", protocol.SessionOutputRequest{})
	wantCode(t, err, protocol.CodeWorkspaceNotFound)
	sid := startAsync(t, e, id, "cat")
	_, err = e.svc.SessionOutput(ctx, id, sid, protocol.SessionOutputRequest{Offset: -1})
	wantCode(t, err, protocol.CodeInvalidPayload)
	if !strings.Contains(err.Error(), "offset") {
		t.Fatalf("negative offset: %v", err)
	}
	_, err = e.svc.SessionOutput(ctx, id, sid, protocol.SessionOutputRequest{Offset: 99})
	wantCode(t, err, protocol.CodeInvalidPayload)
	_, err = e.svc.SessionSignal(ctx, id, sid, protocol.SessionSignalRequest{Signal: "SIGNOPE"})
	wantCode(t, err, protocol.CodeInvalidPayload)
	if !strings.Contains(err.Error(), "signal") {
		t.Fatalf("bad signal: %v", err)
	}
	// Another workspace's session is not found through this one.
	other := e.acquire(editReq(origin, "other")).WorkspaceID
	_, err = e.svc.SessionOutput(ctx, other, sid, protocol.SessionOutputRequest{})
	wantCode(t, err, protocol.CodeSessionNotFound)
	must[sandbox.SessionInfo](t)(e.svc.SessionEnd(ctx, id, sid, struct{}{}))
}

// A tty session runs on a terminal: the program sees one, its input is
// echoed, and Ctrl-D (eof) ends cat.
func TestTTYSessionRunsOnATerminal(t *testing.T) {
	forHostRuntimes(t, func(t *testing.T, e *env, id string) {
		ctx := context.Background()
		res := must[sandbox.ExecResult](t)(e.svc.Exec(ctx, id, sandbox.ExecRequest{Mode: sandbox.ExecAsync, TTY: true,
			Command: "test -t 0 && test -t 1 && echo on-a-tty; stty size; cat"}))
		sid := res.SessionID
		head := awaitOutput(t, e, id, sid, 0, "on-a-tty\r\n24 80\r\n")
		if _, err := e.svc.SessionInput(ctx, id, sid, protocol.SessionInputRequest{Data: "hi\n", EOF: true}); err != nil {
			t.Fatal(err)
		}
		end := awaitEnd(t, e, id, sid, head.NextOffset)
		// The terminal echoes the line, cat writes it back, Ctrl-D ends it.
		if !strings.HasPrefix(end.Output, "hi\r\nhi\r\n") || *end.ExitCode != 0 {
			t.Fatalf("after the input: %+v", end)
		}
	})
}

func TestTTYIsOnlyForAsync(t *testing.T) {
	origin := makeOrigin(t, nil)
	e := newEnv(t, nil)
	id := e.acquire(editReq(origin, "tty")).WorkspaceID
	_, err := e.svc.Exec(context.Background(), id, sandbox.ExecRequest{Command: "true", TTY: true})
	wantCode(t, err, protocol.CodeInvalidPayload)
	if !strings.Contains(err.Error(), "tty") {
		t.Fatalf("sync tty: %v", err)
	}
}

// A running session keeps its runtime from idle eviction; evicting the
// workspace ends it; an ended session is forgotten after SessionKeep.
func TestSessionsFollowEvictionAndAreForgottenAfterKeep(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	origin := makeOrigin(t, nil)
	e := newEnv(t, func(c *sandbox.Config) { c.Now = clock.Now; c.SessionKeep = time.Minute })
	ctx := context.Background()
	id := e.acquire(editReq(origin, "evict")).WorkspaceID
	done := startAsync(t, e, id, "echo done")
	awaitEnd(t, e, id, done, 0)
	sid := startAsync(t, e, id, "sleep 1732.05")

	clock.Advance(sandbox.DefaultRuntimeIdle + time.Minute)
	res := must[sandbox.EvictResult](t)(e.svc.Evict(ctx, sandbox.EvictRequest{}))
	if len(res.Actions) != 0 {
		t.Fatalf("evicted a runtime with a running session: %+v", res.Actions)
	}
	if out := output(t, e, id, sid, 0); !out.Running {
		t.Fatalf("the session ended: %+v", out)
	}
	// The ended one is past its keep: forgotten.
	_, err := e.svc.SessionOutput(ctx, id, done, protocol.SessionOutputRequest{})
	wantCode(t, err, protocol.CodeSessionNotFound)

	clock.Advance(60 * 24 * time.Hour)
	res = must[sandbox.EvictResult](t)(e.svc.Evict(ctx, sandbox.EvictRequest{}))
	if len(res.Actions) == 0 {
		t.Fatal("nothing evicted")
	}
	_, err = e.svc.SessionOutput(ctx, id, sid, protocol.SessionOutputRequest{})
	wantCode(t, err, protocol.CodeWorkspaceNotFound)
	if left := procsWith("1732.05"); len(left) != 0 {
		t.Fatalf("the session outlived its workspace's eviction: %v", left)
	}
	if list := must[sandbox.ListResult](t)(e.svc.List(sandbox.ListRequest{}), nil); len(list.Workspaces) != 1 || list.Workspaces[0].Running {
		t.Fatalf("after eviction: %+v", list)
	}
}
