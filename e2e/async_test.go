package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
	"github.com/tetherdev/tether/terminal"
)

// Durable async calls (docs/async-calls.md) end to end: broker processes on
// one redis-server (or alone, in memory), real bridges and socket.io
// clients, and the API from the outside.

// asyncAnswer is one answer of the async API: a record, or an error.
type asyncAnswer struct {
	status int
	header http.Header
	rec    store.Record
	fail   protocol.ToolResponse
}

// asyncRequest sends a request of the async API to b.
func (b *brokerProc) asyncRequest(method, path, tok, body string, header ...string) asyncAnswer {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, b.url+path, rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s on %s: %v", method, path, b.name, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := asyncAnswer{status: res.StatusCode, header: res.Header}
	target := any(&a.rec)
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusAccepted {
		target = &a.fail
	}
	if err := json.Unmarshal(raw, target); err != nil {
		b.t.Fatalf("%s %s on %s answered HTTP %d %q: %v", method, path, b.name, res.StatusCode, raw, err)
	}
	return a
}

// submit makes an async call and fails the test unless it was accepted.
func (b *brokerProc) submit(ws, tok, body string, header ...string) store.Record {
	b.t.Helper()
	a := b.asyncRequest(http.MethodPost, "/api/v1/workspaces/"+ws+"/calls", tok, body, header...)
	if a.status != http.StatusAccepted || a.rec.CorrelationID == "" || a.header.Get("Location") != "/api/v1/calls/"+a.rec.CorrelationID {
		b.t.Fatalf("submit %s on %s: HTTP %d %+v %+v", body, b.name, a.status, a.rec, a.fail)
	}
	return a.rec
}

// record reads a call's record, waiting up to wait seconds for its outcome.
func (b *brokerProc) record(cid, tok string, wait float64) store.Record {
	b.t.Helper()
	a := b.asyncRequest(http.MethodGet, fmt.Sprintf("/api/v1/calls/%s?wait=%g", cid, wait), tok, "")
	if a.status != http.StatusOK {
		b.t.Fatalf("status of %s on %s: HTTP %d %+v", cid, b.name, a.status, a.fail)
	}
	return a.rec
}

func (b *brokerProc) cancel(cid, tok string) store.Record {
	b.t.Helper()
	a := b.asyncRequest(http.MethodPost, "/api/v1/calls/"+cid+"/cancel", tok, "")
	if a.status != http.StatusOK {
		b.t.Fatalf("cancel of %s on %s: HTTP %d %+v", cid, b.name, a.status, a.fail)
	}
	return a.rec
}

func wantSucceeded(t *testing.T, rec store.Record, result string) {
	t.Helper()
	if rec.Status != store.Succeeded || rec.Response == nil || !rec.Response.Success || rec.DeliveredAt == nil || rec.FinishedAt == nil {
		t.Fatalf("record %+v, response %+v; want succeeded", rec, rec.Response)
	}
	if result != "" && compactJSON(t, rec.Response.Result) != result {
		t.Fatalf("result %s, want %s", rec.Response.Result, result)
	}
}

// TestCallsHelpNamesEveryVerb: `tether calls -h` says what each verb does
// and what its exit status means, and exits 0; without a verb, or with an
// unknown one, it prints the same and exits 2 (a usage error).
func TestCallsHelpNamesEveryVerb(t *testing.T) {
	run := func(args ...string) (string, int) {
		cmd := exec.Command(tetherBin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		code := exitCode(t, cmd)
		return stderr.String(), code
	}
	for _, c := range []struct {
		args []string
		code int
	}{{[]string{"calls", "-h"}, 0}, {[]string{"calls", "--help"}, 0}, {[]string{"calls"}, 2}, {[]string{"calls", "stat", "x"}, 2}} {
		out, code := run(c.args...)
		if code != c.code {
			t.Errorf("tether %s: exit %d, want %d", strings.Join(c.args, " "), code, c.code)
		}
		for _, want := range []string{"status ", "wait ", "cancel ", "Exit status", "3 wait ended"} {
			if !strings.Contains(out, want) {
				t.Errorf("tether %s printed no %q:\n%s", strings.Join(c.args, " "), want, out)
			}
		}
	}
}

// TestAsyncSubmitThenWaitSucceeds: submit, then wait, gives the call's
// response, on a broker alone (in memory), across two brokers on Redis
// (submitted on one, the bridge on the other, read from both) and on a
// Redis Cluster; tether call --async and tether calls wait do the same from
// the command line.
func TestAsyncSubmitThenWaitSucceeds(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		b := startBroker(t)
		startBridge(t, b, "ws-async")
		tok := token(t, auth.RoleCaller, "ws-async")
		rec := b.submit("ws-async", tok, `{"endpoint":"/api/ping","payload":{"n":1},"timeout":10,"async":true}`)
		// The broker holds the workspace itself: the call is delivered at once.
		if rec.Status != store.Delivered || rec.DeliveredAt == nil || rec.WorkspaceID != "ws-async" || rec.Endpoint != "/api/ping" {
			t.Fatalf("submitted %+v", rec)
		}
		wantSucceeded(t, b.record(rec.CorrelationID, tok, 10), `{"n":1}`)

		// The command line: --async prints the id, calls wait the outcome.
		cli := func(args ...string) (string, int) {
			cmd := exec.Command(tetherBin, args...)
			cmd.Env = append(os.Environ(), "TETHER_BROKER="+b.url, "TETHER_TOKEN="+tok)
			var out strings.Builder
			cmd.Stdout = &out
			code := exitCode(t, cmd)
			return strings.TrimSpace(out.String()), code
		}
		id, code := cli("call", "--workspace", "ws-async", "--async", "/api/ping", `{"cli":true}`)
		if code != 0 || id == "" || strings.ContainsAny(id, "{ \n") {
			t.Fatalf("tether call --async printed %q, exit %d", id, code)
		}
		out, code := cli("calls", "wait", "--compact", id)
		var got store.Record
		if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
			t.Fatalf("tether calls wait printed %q, exit %d", out, code)
		}
		wantSucceeded(t, got, `{"cli":true}`)
		if out, code := cli("calls", "cancel", "--compact", id); code != 0 || !strings.Contains(out, `"status":"succeeded"`) {
			t.Fatalf("tether calls cancel after success printed %q, exit %d", out, code)
		}
		if out, code := cli("calls", "status", "no-such-call"); code != 1 || !strings.Contains(out, protocol.CodeCallNotFound) {
			t.Fatalf("tether calls status of an unknown id printed %q, exit %d", out, code)
		}
	})
	t.Run("redis", func(t *testing.T) {
		e := newRedisEnv(t)
		a := e.broker("a")
		b := e.broker("b")
		startBridge(t, b, "ws-async")
		tok := token(t, auth.RoleCaller, "ws-async")
		rec := a.submit("ws-async", tok, `{"endpoint":"/api/ping","payload":{"n":2},"timeout":10}`, "Prefer", "respond-async")
		wantSucceeded(t, a.record(rec.CorrelationID, tok, 10), `{"n":2}`)
		fromB := b.record(rec.CorrelationID, tok, 0)
		wantSucceeded(t, fromB, `{"n":2}`)
		b.waitLine(5*time.Second, "call delivered to socket", rec.CorrelationID)
	})
	t.Run("cluster", func(t *testing.T) {
		// On a Cluster the call is queued and the holder drains the queue;
		// outcomes are announced with sharded pub/sub.
		e := newClusterEnv(t)
		a := e.broker("a")
		b := e.broker("b")
		startBridge(t, b, "ws-async")
		tok := token(t, auth.RoleCaller, "ws-async")
		rec := a.submit("ws-async", tok, `{"endpoint":"/api/ping","payload":{"n":3},"timeout":10,"async":true}`)
		wantSucceeded(t, a.record(rec.CorrelationID, tok, 10), `{"n":3}`)
		b.waitLine(5*time.Second, "async call claimed", rec.CorrelationID)
	})
}

// TestAsyncGoCallersSubmitWaitAndCancel: the Go callers, over HTTP and
// straight on Redis (BusCaller with the store), submit, wait and cancel,
// and submit and wait in one step (SubmitWait).
func TestAsyncGoCallersSubmitWaitAndCancel(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-go-async")
	overHTTP := &caller.HTTP{BaseURL: a.url, Token: token(t, auth.RoleCaller, "*")}
	overRedis := e.asyncCaller()
	ctx := context.Background()
	for name, c := range map[string]caller.Async{"http": overHTTP, "redis": overRedis} {
		rec, err := c.Submit(ctx, caller.Request{WorkspaceID: "ws-go-async", Endpoint: "/api/ping", Payload: json.RawMessage(`{"via":"` + name + `"}`), Timeout: 10 * time.Second})
		if err != nil || (rec.Status != store.Queued && rec.Status != store.Delivered) {
			t.Fatalf("%s: Submit = %+v, %v", name, rec, err)
		}
		got, err := c.Wait(ctx, rec.CorrelationID, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: Wait: %v", name, err)
		}
		wantSucceeded(t, got, `{"via":"`+name+`"}`)
		again, err := c.Cancel(ctx, rec.CorrelationID)
		if err != nil || again.Status != store.Succeeded {
			t.Fatalf("%s: Cancel after success = %+v, %v", name, again, err)
		}
		if _, err := c.Status(ctx, "no-such-call"); protocol.FailureFrom("", err, "").Error != protocol.CodeCallNotFound {
			t.Fatalf("%s: Status of an unknown id: %v", name, err)
		}
		// SubmitWait returns the outcome of a call that ends within its
		// wait, and the record then of one that does not.
		quick, err := c.SubmitWait(ctx, caller.Request{WorkspaceID: "ws-go-async", Endpoint: "/api/ping", Payload: json.RawMessage(`{"quick":"` + name + `"}`), Timeout: 10 * time.Second}, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: SubmitWait: %v", name, err)
		}
		wantSucceeded(t, quick, `{"quick":"`+name+`"}`)
		start := time.Now()
		slow, err := c.SubmitWait(ctx, caller.Request{WorkspaceID: "ws-go-async", Endpoint: "/api/terminal/execute", Payload: json.RawMessage(`{"command":"sleep 1; echo late","hidden":true}`), Timeout: 10 * time.Second}, 200*time.Millisecond)
		if err != nil || slow.Status != store.Delivered || time.Since(start) < 200*time.Millisecond || time.Since(start) > 900*time.Millisecond {
			t.Fatalf("%s: SubmitWait of a sleep 1 for 200ms = %+v, %v after %s", name, slow, err, time.Since(start))
		}
		if got, err := c.Wait(ctx, slow.CorrelationID, 10*time.Second); err != nil || got.Status != store.Succeeded || !strings.Contains(string(got.Response.Result), "late") {
			t.Fatalf("%s: the slow call's outcome: %+v, %v", name, got, err)
		}
	}
	// A call one caller made is read by the other.
	rec, err := overRedis.Submit(ctx, caller.Request{WorkspaceID: "ws-go-async", Endpoint: "/api/ping", Payload: json.RawMessage(`"shared"`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := overHTTP.Wait(ctx, rec.CorrelationID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantSucceeded(t, got, `"shared"`)
}

// TestAsyncQueuedCallIsDeliveredByTheInstanceTheWorkspaceConnectsTo: a call
// for an offline workspace that may wait is queued; a bridge connects to the
// other broker a second later, which delivers the call; the first broker
// reads its record.
func TestAsyncQueuedCallIsDeliveredByTheInstanceTheWorkspaceConnectsTo(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	tok := token(t, auth.RoleCaller, "ws-later")
	rec := a.submit("ws-later", tok, `{"endpoint":"/api/ping","payload":"queued","timeout":30,"async":true,"wait_for_workspace_ms":20000}`)
	if rec.Status != store.Queued {
		t.Fatalf("submitted %+v", rec)
	}
	if got := a.record(rec.CorrelationID, tok, 1); got.Status != store.Queued || got.DeliveredAt != nil {
		t.Fatalf("a second later: %+v", got)
	}
	startBridge(t, b, "ws-later")
	got := a.record(rec.CorrelationID, tok, 10)
	wantSucceeded(t, got, `"queued"`)
	b.waitLine(time.Second, "async call claimed", rec.CorrelationID)
	for _, line := range a.linesWith("async call claimed") {
		t.Fatalf("the instance the workspace never connected to claimed a call: %s", line)
	}
}

// TestAsyncEntryBrokerKilledOtherInstanceServesTheOutcome: the broker that
// took the submit is killed with SIGKILL while the call runs; the other
// instance serves its status and its outcome.
func TestAsyncEntryBrokerKilledOtherInstanceServesTheOutcome(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-entry")
	tok := token(t, auth.RoleCaller, "ws-entry")
	rec := a.submit("ws-entry", tok, `{"endpoint":"/api/terminal/execute","payload":{"command":"sleep 1; echo survived","hidden":true},"timeout":20,"async":true}`)
	a.stop(syscall.SIGKILL, 5*time.Second)
	if got := b.record(rec.CorrelationID, tok, 0); got.Status != store.Queued && got.Status != store.Delivered {
		t.Fatalf("status from the other instance: %+v", got)
	}
	got := b.record(rec.CorrelationID, tok, 15)
	wantSucceeded(t, got, "")
	var res terminal.ExecResult
	if err := json.Unmarshal(got.Response.Result, &res); err != nil || strings.TrimSpace(res.Output) != "survived" {
		t.Fatalf("result %s", got.Response.Result)
	}
}

// TestAsyncOwnerKilledCallEndsTimeoutAtDeadlinePlusGrace: the broker holding
// a delivered call dies; the sweep of the other instance ends the call
// failed/timeout at its deadline plus the grace, not later.
func TestAsyncOwnerKilledCallEndsTimeoutAtDeadlinePlusGrace(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-owner")
	tok := token(t, auth.RoleCaller, "ws-owner")
	rec := a.submit("ws-owner", tok, `{"endpoint":"/api/terminal/execute","payload":{"command":"sleep 30","hidden":true},"timeout":2,"async":true}`)
	b.waitLine(5*time.Second, "call delivered to socket", rec.CorrelationID)
	b.stop(syscall.SIGKILL, 5*time.Second)
	got := a.record(rec.CorrelationID, tok, 10)
	if got.Status != store.Failed || got.Response.Error != protocol.CodeTimeout || got.DeliveredAt == nil {
		t.Fatalf("record %+v %+v; want failed timeout", got, got.Response)
	}
	if late := got.FinishedAt.Sub(rec.Deadline); late < grace || late > grace+500*time.Millisecond {
		t.Fatalf("ended %s after its deadline, want the %s grace (plus a sweep)", late, grace)
	}
}

// TestAsyncCancelWhileDeliveredStopsTheCommand: cancelled through the other
// instance, a running command is stopped (no process left) and the call is
// cancelled; cancelling a call that succeeded leaves it succeeded.
func TestAsyncCancelWhileDeliveredStopsTheCommand(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	tb := startTermBridgeOn(t, e.broker("b"), "ws-cancel")
	tb.modes(func(t *testing.T, hidden bool) {
		body, _ := json.Marshal(map[string]any{"endpoint": "/api/terminal/execute", "timeout": 60, "async": true,
			"payload": map[string]any{"command": "sleep 30", "hidden": hidden}})
		rec := a.submit(tb.ws, tb.tok, string(body))
		testwait.Until(t, 5*time.Second, func() bool { return len(tb.running("sleep 30")) > 0 }, "sleep to start")
		got := a.cancel(rec.CorrelationID, tb.tok)
		if got.Status != store.Cancelled || got.Response.Error != protocol.CodeCancelled {
			t.Fatalf("cancel answered %+v", got)
		}
		start := time.Now()
		testwait.Until(t, 2*time.Second, func() bool { return len(tb.running("sleep 30")) == 0 }, "the sleep to be killed")
		t.Logf("stopped %v after the cancel", time.Since(start))
		if got := tb.b.record(rec.CorrelationID, tb.tok, 0); got.Status != store.Cancelled {
			t.Fatalf("status on the owner after the cancel: %+v", got)
		}
	})
	rec := a.submit(tb.ws, tb.tok, `{"endpoint":"/api/terminal/execute","payload":{"command":"echo hi","hidden":true},"timeout":10,"async":true}`)
	done := a.record(rec.CorrelationID, tb.tok, 10)
	wantSucceeded(t, done, "")
	if got := a.cancel(rec.CorrelationID, tb.tok); got.Status != store.Succeeded || compactJSON(t, got.Response.Result) != compactJSON(t, done.Response.Result) || !got.FinishedAt.Equal(*done.FinishedAt) {
		t.Fatalf("cancel after success answered %+v", got)
	}
}

// TestAsyncQueuedCallPastItsDeadlineFailsAndIsNeverDelivered: a queued call
// whose deadline passes ends failed/timeout, and a client connecting later
// never receives it.
func TestAsyncQueuedCallPastItsDeadlineFailsAndIsNeverDelivered(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	tok := token(t, auth.RoleCaller, "ws-expired")
	rec := a.submit("ws-expired", tok, `{"endpoint":"/api/ping","timeout":1,"async":true,"wait_for_workspace_ms":60000}`)
	got := b.record(rec.CorrelationID, tok, 10)
	if got.Status != store.Failed || got.Response.Error != protocol.CodeTimeout || got.DeliveredAt != nil {
		t.Fatalf("record %+v %+v; want failed timeout, never delivered", got, got.Response)
	}
	if late := got.FinishedAt.Sub(rec.Deadline); late < 0 || late > 500*time.Millisecond {
		t.Fatalf("ended %s after its deadline", late)
	}
	ide := connectIDE(t, b, "ws-expired", "ack")
	select {
	case ev := <-ide.events:
		t.Fatalf("the client got %v after the call had timed out", ev)
	case <-time.After(time.Second):
	}
	if again := a.record(rec.CorrelationID, tok, 0); again.Status != store.Failed || again.Response.Error != protocol.CodeTimeout {
		t.Fatalf("later: %+v", again)
	}
}

// TestAsyncIdempotentRetryRunsTheCommandOnce: the same submit with the same
// Idempotency-Key, on either instance, returns the same call, and the bridge
// runs its command once; the key with another body is refused.
func TestAsyncIdempotentRetryRunsTheCommandOnce(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	tb := startTermBridgeOn(t, e.broker("b"), "ws-idem")
	body := `{"endpoint":"/api/terminal/execute","payload":{"command":"echo ran >> runs.txt","hidden":true},"timeout":10,"async":true}`
	first := a.submit(tb.ws, tb.tok, body, "Idempotency-Key", "deploy-42")
	retry := tb.b.submit(tb.ws, tb.tok, body, "Idempotency-Key", "deploy-42")
	if retry.CorrelationID != first.CorrelationID {
		t.Fatalf("the retry made call %s, want %s", retry.CorrelationID, first.CorrelationID)
	}
	wantSucceeded(t, a.record(first.CorrelationID, tb.tok, 10), "")
	late := a.submit(tb.ws, tb.tok, strings.Replace(body, `"async":true`, `"async":true,"idempotency_key":"deploy-42"`, 1))
	if late.CorrelationID != first.CorrelationID || late.Status != store.Succeeded {
		t.Fatalf("a retry after the outcome: %+v", late)
	}
	conflict := a.asyncRequest(http.MethodPost, "/api/v1/workspaces/"+tb.ws+"/calls", tb.tok, strings.Replace(body, "echo ran", "echo other", 1), "Idempotency-Key", "deploy-42")
	if conflict.status != http.StatusConflict || conflict.fail.Error != protocol.CodeConflict || !strings.Contains(conflict.fail.Message, "deploy-42") {
		t.Fatalf("same key, other body: HTTP %d %+v", conflict.status, conflict.fail)
	}
	runs, err := os.ReadFile(filepath.Join(tb.root, "runs.txt"))
	if err != nil || string(runs) != "ran\n" {
		t.Fatalf("runs.txt holds %q (%v), want one run", runs, err)
	}
}

// TestAsyncSubmitWithRedisDownIsBusUnavailable: with Redis gone a submit is
// refused bus_unavailable at once (no 202 for a call nobody recorded), and
// status requests answer within their bound.
func TestAsyncSubmitWithRedisDownIsBusUnavailable(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	tok := token(t, auth.RoleCaller, "ws-down")
	e.srv.Stop()
	start := time.Now()
	got := a.asyncRequest(http.MethodPost, "/api/v1/workspaces/ws-down/calls", tok, `{"endpoint":"/api/ping","async":true}`)
	if got.status != http.StatusServiceUnavailable || got.fail.Error != protocol.CodeBusUnavailable || time.Since(start) > time.Second {
		t.Fatalf("submit with Redis down: HTTP %d %+v after %s", got.status, got.fail, time.Since(start))
	}
	start = time.Now()
	got = a.asyncRequest(http.MethodGet, "/api/v1/calls/some-call?wait=5", tok, "")
	if got.status != http.StatusServiceUnavailable || got.fail.Error != protocol.CodeBusUnavailable || time.Since(start) > 4*time.Second {
		t.Fatalf("status with Redis down: HTTP %d %+v after %s", got.status, got.fail, time.Since(start))
	}
}

// TestAsyncThousandCallsOverTwoInstancesWithRandomCancels: 1,000 async calls
// to two workspaces, each held by a socket.io client on one of two brokers,
// submitted, cancelled (a quarter of them, at random moments) and waited for
// through either broker. Every call ends with exactly one outcome, the same
// on both instances and the one its cancel reported; none reaches a client
// twice; a cancelled call that was delivered got tool_cancel; and every
// record is gone after the (short) retention.
func TestAsyncThousandCallsOverTwoInstancesWithRandomCancels(t *testing.T) {
	const retention = 4 * time.Second
	e := newRedisEnv(t)
	brokers := []*brokerProc{e.broker("a", "--call-retention", retention.String()), e.broker("b", "--call-retention", retention.String())}
	workspaces := []string{"ws-k1", "ws-k2"}
	tok := token(t, auth.RoleCaller, workspaces...)

	// Each client holds its calls and answers each after 0-30 ms, unless
	// tool_cancel came first; what it saw is counted.
	type seen struct {
		mu        sync.Mutex
		delivered map[string]int
		answered  map[string]bool
		cancelled map[string]bool
	}
	s := &seen{delivered: map[string]int{}, answered: map[string]bool{}, cancelled: map[string]bool{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, ws := range workspaces {
		ide := connectIDE(t, brokers[i], ws, "none")
		answers := make(chan string, 1024)
		wg.Go(func() { // the one writer of the client's stdin
			for {
				select {
				case cid := <-answers:
					line, _ := json.Marshal(map[string]string{"cmd": "answer", "correlation_id": cid, "via": "ack"})
					_, _ = ide.stdin.Write(append(line, '\n'))
				case <-stop:
					return
				}
			}
		})
		wg.Go(func() {
			for {
				select {
				case ev := <-ide.events:
					cid, _ := ev["correlation_id"].(string)
					switch ev["event"] {
					case "tool_call":
						s.mu.Lock()
						s.delivered[cid]++
						s.mu.Unlock()
						wg.Go(func() {
							select {
							case <-time.After(time.Duration(rand.IntN(30)) * time.Millisecond):
								answers <- cid
							case <-stop:
							}
						})
					case "answered":
						s.mu.Lock()
						s.answered[cid] = true
						s.mu.Unlock()
					case "tool_cancel":
						s.mu.Lock()
						s.cancelled[cid] = true
						s.mu.Unlock()
					}
				case <-stop:
					return
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()

	const n = 1000
	type call struct {
		rec      store.Record
		ws       string
		cancel   *store.Record // what the cancel answered, when one was sent
		final    store.Record
		again    store.Record // final, read from the other instance
		entry    *brokerProc
		finalVia *brokerProc
	}
	calls := make([]call, n)
	work := make(chan int)
	var wwg sync.WaitGroup
	for range 16 {
		wwg.Go(func() {
			for i := range work {
				c := &calls[i]
				c.ws = workspaces[rand.IntN(2)]
				c.entry = brokers[rand.IntN(2)]
				c.rec = c.entry.submit(c.ws, tok, fmt.Sprintf(`{"endpoint":"/api/ping","payload":{"i":%d},"timeout":30,"async":true}`, i))
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond) // a random moment to cancel at: its race with the answer is the subject
					got := brokers[rand.IntN(2)].cancel(c.rec.CorrelationID, tok)
					c.cancel = &got
				}
				c.finalVia = brokers[rand.IntN(2)]
				c.final = c.finalVia.record(c.rec.CorrelationID, tok, 30)
				// The other instance reads the same outcome (now: the
				// retention is short).
				other := brokers[0]
				if c.finalVia == brokers[0] {
					other = brokers[1]
				}
				c.again = other.record(c.rec.CorrelationID, tok, 0)
			}
		})
	}
	start := time.Now()
	for i := range n {
		work <- i
	}
	close(work)
	wwg.Wait()
	t.Logf("%d calls submitted and ended in %s", n, time.Since(start))

	counts := map[string]int{}
	for i := range calls {
		c := &calls[i]
		counts[c.final.Status]++
		if !store.IsFinal(c.final.Status) || c.final.Response == nil || c.final.FinishedAt == nil {
			t.Fatalf("call %d not final: %+v", i, c.final)
		}
		if c.cancel != nil && (c.cancel.Status != c.final.Status || !c.cancel.FinishedAt.Equal(*c.final.FinishedAt)) {
			t.Fatalf("call %d: the cancel answered %s, the record says %s", i, c.cancel.Status, c.final.Status)
		}
		if c.again.Status != c.final.Status || c.again.FinishedAt == nil || !c.again.FinishedAt.Equal(*c.final.FinishedAt) {
			t.Fatalf("call %d: %s says %s, the other instance %s", i, c.finalVia.name, c.final.Status, c.again.Status)
		}
		switch c.final.Status {
		case store.Succeeded:
			var echo struct {
				Echo struct{ I int } `json:"echo"`
			}
			if json.Unmarshal(c.final.Response.Result, &echo) != nil || echo.Echo.I != i {
				t.Fatalf("call %d answered %s", i, c.final.Response.Result)
			}
		case store.Cancelled:
			if c.cancel == nil {
				t.Fatalf("call %d cancelled without a cancel", i)
			}
		default:
			t.Fatalf("call %d ended %s: %+v", i, c.final.Status, c.final.Response)
		}
	}
	// What the clients saw: each call at most once; a cancelled call that
	// reached a client was cancelled there too (the tool_cancel may still
	// be on its way), unless the client had answered it already and the
	// cancel won the race to record the outcome.
	missing, toolCancels := 0, 0
	if !testwait.Within(5*time.Second, func() bool {
		missing, toolCancels = 0, 0
		s.mu.Lock()
		defer s.mu.Unlock()
		for i := range calls {
			c := &calls[i]
			cid := c.rec.CorrelationID
			if k := s.delivered[cid]; k > 1 || (c.final.Status == store.Succeeded && k != 1) {
				t.Fatalf("call %d (%s) reached a client %d times", i, c.final.Status, k)
			}
			if c.final.Status == store.Cancelled && s.delivered[cid] == 1 && !s.cancelled[cid] && !s.answered[cid] {
				missing++
			}
			if s.cancelled[cid] {
				toolCancels++
			}
		}
		return missing == 0
	}) {
		t.Fatalf("%d cancelled calls that were delivered never got tool_cancel", missing)
	}
	t.Logf("outcomes: %v; %d calls cancelled at their client", counts, toolCancels)
	if counts[store.Cancelled] == 0 || counts[store.Succeeded] == 0 || toolCancels == 0 {
		t.Fatalf("outcomes %v, %d tool_cancel: want succeeded calls and cancelled ones, some at their client", counts, toolCancels)
	}

	// After the retention every record is gone, on both instances.
	expire := time.Now().Add(retention + 5*time.Second)
	for i := range calls {
		var a asyncAnswer
		if !testwait.Within(time.Until(expire), func() bool {
			a = brokers[i%2].asyncRequest(http.MethodGet, "/api/v1/calls/"+calls[i].rec.CorrelationID, tok, "")
			return a.status == http.StatusNotFound && a.fail.Error == protocol.CodeCallNotFound
		}) {
			t.Fatalf("call %d still answers HTTP %d %s past its retention", i, a.status, a.rec.Status)
		}
	}
}

// asyncCaller is a Go backend worker making async calls straight on Redis:
// caller.BusCaller with the brokers' store on its bus, all closed in
// t.Cleanup (the caller first, the bus last).
func (e *redisEnv) asyncCaller() *caller.BusCaller {
	e.t.Helper()
	rb := e.workerBus()
	cfg := store.RedisConfig{Prefix: e.prefix, Bus: rb, Logger: e.logger()}
	cfg.URL, cfg.ClusterAddrs = e.addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.NewRedis(ctx, cfg)
	if err != nil {
		e.t.Fatalf("store.NewRedis: %v", err)
	}
	e.t.Cleanup(func() { _ = st.Close() })
	return e.newBusCaller(rb, caller.BusCallerOptions{Store: st})
}

// linesWith returns the stderr lines so far that hold every part.
func (p *proc) linesWith(parts ...string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		ok := true
		for _, part := range parts {
			ok = ok && strings.Contains(l, part)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// TestAsyncPythonExampleSubmitsWaitsAndCancels runs
// examples/python/tether_async.py, the documented HTTP client of async
// calls, against two brokers on Redis: submit on one, wait and cancel on
// the other, and a refused request.
func TestAsyncPythonExampleSubmitsWaitsAndCancels(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	script, err := filepath.Abs("../examples/python/tether_async.py")
	if err != nil {
		t.Fatal(err)
	}
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-py-async")
	tok := token(t, auth.RoleCaller, "ws-py-async")
	run := func(via *brokerProc, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(py, append([]string{script, "--broker", via.url, "--token", tok}, args...)...)
		var out strings.Builder
		cmd.Stdout = &out
		code := exitCode(t, cmd)
		return strings.TrimSpace(out.String()), code
	}
	record := func(out string) store.Record {
		t.Helper()
		var rec store.Record
		if err := json.Unmarshal([]byte(out), &rec); err != nil {
			t.Fatalf("tether_async.py printed %q: %v", out, err)
		}
		return rec
	}
	id, code := run(a, "submit", "--workspace", "ws-py-async", "--timeout", "10", "--idempotency-key", "py-1", "/api/ping", `{"from":"python"}`)
	if code != 0 || id == "" {
		t.Fatalf("submit printed %q, exit %d", id, code)
	}
	if again, _ := run(b, "submit", "--workspace", "ws-py-async", "--timeout", "10", "--idempotency-key", "py-1", "/api/ping", `{"from":"python"}`); again != id {
		t.Fatalf("the retry made call %s, want %s", again, id)
	}
	out, code := run(b, "wait", id)
	if code != 0 {
		t.Fatalf("wait printed %q, exit %d", out, code)
	}
	wantSucceeded(t, record(out), `{"from":"python"}`)
	if out, code := run(a, "cancel", id); code != 0 || record(out).Status != store.Succeeded {
		t.Fatalf("cancel after success printed %q, exit %d", out, code)
	}
	if out, code := run(a, "status", "no-such-call"); code != 1 || !strings.Contains(out, protocol.CodeCallNotFound) {
		t.Fatalf("status of an unknown id printed %q, exit %d", out, code)
	}
}

// TestAsyncTypeScriptExampleAgainstARealBridge compiles
// examples/typescript with the pinned tsc and runs its own test (node
// --test) against a broker and a bridge: the sandbox interface over async
// calls, including an abort that cancels a sleep 30. No command the test
// started may be left running.
func TestAsyncTypeScriptExampleAgainstARealBridge(t *testing.T) {
	clients := clientsDir(t)
	tsc := filepath.Join(clients, "node_modules", ".bin", "tsc")
	example, err := filepath.Abs("../examples/typescript")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if b, err := exec.Command(tsc, "-p", example, "--outDir", out).CombinedOutput(); err != nil {
		t.Fatalf("tsc -p examples/typescript: %v\n%s", err, b)
	}
	// The compiled client is an ES module; its directory says so.
	if err := os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type":"module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := startTermBridgeOn(t, startBroker(t), "ws-ts")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", filepath.Join(example, "test"))
	cmd.Env = append(os.Environ(), "TETHER_BROKER="+tb.b.url, "TETHER_TOKEN="+tb.tok, "TETHER_WORKSPACE="+tb.ws,
		"TETHER_SANDBOX_MODULE=file://"+filepath.Join(out, "sandbox.js"))
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{}, syscall.SIGKILL)
	report, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test examples/typescript/test: %v\n%s", err, report)
	}
	t.Logf("node --test:\n%s", report)
	if left := tb.running("sleep 30"); len(left) > 0 {
		t.Fatalf("sleep 30 left running after the test: %v", left)
	}
}
