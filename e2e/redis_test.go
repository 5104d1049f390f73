package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// grace is caller.DefaultGrace, which the brokers run with: how long past a
// call's deadline the caller's instance waits for the owner's answer.
const grace = caller.DefaultGrace

// compactJSON returns raw without insignificant spaces.
func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("not JSON: %q: %v", raw, err)
	}
	return b.String()
}

// TestRedisCallOnOneInstanceAnsweredByTheOwnerOnAnother: three brokers on one
// Redis, a bridge on B; calls on A and C reach B and come back through their
// own inbox. C takes its Redis settings from the environment.
func TestRedisCallOnOneInstanceAnsweredByTheOwnerOnAnother(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	c := startNamedBroker(t, "broker c", []string{"TETHER_REDIS=" + e.srv.URL(), "TETHER_REDIS_PREFIX=" + e.prefix}, "--instance-id", "c")
	startBridge(t, b, "ws-cross")
	tok := token(t, auth.RoleCaller, "ws-cross")
	for i, via := range []*brokerProc{a, c, b} {
		r := via.call("ws-cross", tok, fmt.Sprintf(`{"endpoint":"/api/ping","payload":{"n":%d},"timeout":5}`, i))
		if r.err != nil || r.status != 200 || !r.resp.Success || compactJSON(t, r.resp.Result) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("call %d via %s: %v %d %+v", i, via.name, r.err, r.status, r.resp)
		}
	}
	// A routed the call over Redis and B delivered it: the logs say so.
	a.waitLine(time.Second, "call routed", `"workspace_id":"ws-cross"`)
	b.waitLine(time.Second, "call delivered to socket")
	c.waitLine(time.Second, "routing through redis", e.prefix)
	for _, p := range []*brokerProc{a, b, c} {
		if v := p.metric("tether_replies_dropped_total"); v != 0 {
			t.Errorf("%s dropped %v replies", p.name, v)
		}
	}
}

func TestRedisOfflineWorkspaceAnsweredUnder100ms(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	e.broker("c")
	startBridge(t, b, "ws-elsewhere") // some workspace is online, just not this one
	tok := token(t, auth.RoleCaller, "*")
	a.call("warmup", tok, `{"endpoint":"/x"}`) // opens the keep-alive connection
	for range 5 {
		r := a.call("ws-nobody", tok, `{"endpoint":"/api/ping","timeout":30}`)
		if r.err != nil || r.status != 200 || r.resp.Error != protocol.CodeWorkspaceOffline {
			t.Fatalf("got %v %d %+v", r.err, r.status, r.resp)
		}
		if r.elapsed >= 100*time.Millisecond {
			t.Fatalf("offline answered after %s", r.elapsed)
		}
	}
}

// TestRedisSocketDroppedOnOwnerAnswersPendingCallsUnder500ms: calls made on
// A and C are pending at B when the client's socket on B drops; their
// callers hear workspace_disconnected at once.
func TestRedisSocketDroppedOnOwnerAnswersPendingCallsUnder500ms(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	c := e.broker("c")
	ide := connectIDE(t, b, "ws-drop", "none")
	tok := token(t, auth.RoleCaller, "ws-drop")
	var pending []<-chan callResult
	for i := range 4 {
		pending = append(pending, []*brokerProc{a, c}[i%2].goCall("ws-drop", tok, `{"endpoint":"/api/ping","timeout":30}`))
		ide.await("tool_call", 5*time.Second)
	}
	start := time.Now()
	_ = ide.proc.Process.Kill() // the IDE dies: its socket drops
	for _, ch := range pending {
		r := await(t, ch, 2*time.Second)
		if r.resp.Error != protocol.CodeWorkspaceDisconnected {
			t.Fatalf("got %+v", r.resp)
		}
	}
	if el := time.Since(start); el >= 500*time.Millisecond {
		t.Fatalf("disconnect answered after %s", el)
	}
}

// TestRedisTakeoverOnAnotherInstanceDeliversEachCallOnce: a client for the
// workspace holds it on B while calls stream in through A and C; a newer
// client connects for the same workspace on C. B is told through the
// workspace channel and disconnects its client with reason "replaced"; no
// call reaches both clients, every call is answered exactly once, and calls
// after the takeover are served by the new client.
func TestRedisTakeoverOnAnotherInstanceDeliversEachCallOnce(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a", "--log-level", "info")
	b := e.broker("b", "--log-level", "info")
	c := e.broker("c", "--log-level", "info")
	old := connectIDE(t, b, "ws-move", "ack")
	tok := token(t, auth.RoleCaller, "ws-move")

	const callTimeout = 2 * time.Second
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		answers  = map[string]int{} // correlation id -> answers
		after    []callResult       // calls started once the old client was gone
		stop     = make(chan struct{})
		gone     = make(chan struct{})
		wg       sync.WaitGroup
		seq      int
	)
	for w := range 8 {
		via := []*brokerProc{a, c}[w%2]
		wg.Go(func() {
			for k := 0; k < 400; k++ { // bounded: the loop normally ends on stop
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				seq++
				cid := fmt.Sprintf("m-%d", seq)
				mu.Unlock()
				select {
				case <-gone:
				default:
					cid += "-before"
				}
				r := via.call("ws-move", tok, fmt.Sprintf(`{"endpoint":"/api/ping","timeout":%g,"correlation_id":%q}`, callTimeout.Seconds(), cid))
				if r.err != nil {
					t.Errorf("call %s: %v", cid, r.err)
					return
				}
				mu.Lock()
				answers[r.resp.CorrelationID]++
				outcome := r.resp.Error
				if r.resp.Success {
					outcome = "success via " + map[bool]string{true: "ack", false: "event"}[strings.Contains(string(r.resp.Result), `"via":"ack"`)]
				}
				outcomes[outcome]++
				if !strings.HasSuffix(cid, "-before") {
					after = append(after, r)
				}
				mu.Unlock()
				// Each call is served by exactly one of the two clients, or
				// was pending at B when B let its client go.
				if !r.resp.Success && r.resp.Error != protocol.CodeWorkspaceDisconnected {
					t.Errorf("call %s got %+v after %s", cid, r.resp, r.elapsed)
				}
			}
		})
	}
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	t.Cleanup(halt) // also when the test fails half-way
	// Let calls flow through B first.
	answered := func(via string) int { mu.Lock(); defer mu.Unlock(); return outcomes["success via "+via] }
	testwait.Until(t, 10*time.Second, func() bool { return answered("ack") >= 50 }, "50 calls answered by the old client")

	neu := connectIDE(t, c, "ws-move", "event")
	ev := old.await("disconnect", 5*time.Second)
	close(gone)
	if ev["reason"] != "io server disconnect" {
		t.Fatalf("old client disconnected with %v", ev)
	}
	b.waitLine(5*time.Second, "connection closed", `"reason":"replaced"`)
	testwait.Until(t, 5*time.Second, func() bool { return !b.holds("ws-move") }, "%s no longer holding ws-move", b.name)
	testwait.Until(t, time.Second, func() bool { return c.holds("ws-move") }, "%s holding ws-move", c.name)
	testwait.Until(t, 10*time.Second, func() bool { return answered("event") >= 50 }, "50 calls answered by the new client")
	halt()

	// No call reached both clients.
	delivered := map[string][]string{}
	for name, ide := range map[string]*ideClient{"old": old, "new": neu} {
		for _, ev := range ide.drainEvents() {
			if ev["event"] == "tool_call" {
				cid, _ := ev["correlation_id"].(string)
				delivered[cid] = append(delivered[cid], name)
			}
		}
	}
	for cid, to := range delivered {
		if len(to) != 1 {
			t.Errorf("call %s delivered %d times: %v", cid, len(to), to)
		}
	}
	for cid, n := range answers {
		if n != 1 {
			t.Errorf("call %s answered %d times", cid, n)
		}
	}
	// Calls made after the old client was gone are served by the new one.
	for _, r := range after {
		if !r.resp.Success || !strings.Contains(string(r.resp.Result), `"via":"event"`) {
			t.Errorf("call %s after the takeover got %+v", r.resp.CorrelationID, r.resp)
		}
	}
	// A second answer to a call would have reached a caller's inbox and been
	// dropped there.
	for _, p := range []*brokerProc{a, b, c} {
		if v := p.metric("tether_replies_dropped_total"); v != 0 {
			t.Errorf("%s dropped %v replies", p.name, v)
		}
	}
	t.Logf("outcomes: %v; %d calls after the takeover", outcomes, len(after))
}

// TestRedisOwnerKilledCallersAnsweredByDeadlinePlusGrace: B holds the
// workspace with 50 calls from A and C pending and dies (kill -9). Nobody
// tells A or C; each caller is answered timeout by its own deadline plus
// grace.
func TestRedisOwnerKilledCallersAnsweredByDeadlinePlusGrace(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a", "--log-level", "info")
	b := e.broker("b", "--log-level", "info")
	c := e.broker("c", "--log-level", "info")
	ide := connectIDE(t, b, "ws-doomed", "none")
	tok := token(t, auth.RoleCaller, "ws-doomed")
	const n = 50
	const callTimeout = 2 * time.Second
	var pending []<-chan callResult
	for i := range n {
		pending = append(pending, []*brokerProc{a, c}[i%2].goCall("ws-doomed", tok, fmt.Sprintf(`{"endpoint":"/api/ping","timeout":%g}`, callTimeout.Seconds())))
	}
	for range n {
		ide.await("tool_call", 5*time.Second)
	}
	b.stop(syscall.SIGKILL, 5*time.Second)
	// The deadline is taken when A receives the call; the HTTP round trip
	// adds a little on either side.
	const slack = 250 * time.Millisecond
	for i, ch := range pending {
		r := await(t, ch, callTimeout+grace+5*time.Second)
		if r.resp.Error != protocol.CodeTimeout {
			t.Fatalf("call %d got %+v", i, r.resp)
		}
		if r.elapsed < callTimeout || r.elapsed > callTimeout+grace+slack {
			t.Fatalf("call %d answered after %s, want by %s + %s grace", i, r.elapsed, callTimeout, grace)
		}
	}
	ide.await("disconnect", 5*time.Second)
}

// TestRedisRestartBrokersResubscribeAndReadyzTracksOutage: Redis goes away
// and comes back empty while three brokers and a bridge run. /readyz fails
// meanwhile, calls fail fast instead of hanging, and once /readyz is back
// the workspace is reachable across instances again.
func TestRedisRestartBrokersResubscribeAndReadyzTracksOutage(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a", "--log-level", "info")
	b := e.broker("b", "--log-level", "info")
	c := e.broker("c", "--log-level", "info")
	all := []*brokerProc{a, b, c}
	startBridge(t, b, "ws-phoenix")
	tok := token(t, auth.RoleCaller, "ws-phoenix")
	ping := `{"endpoint":"/api/ping","payload":{"p":1},"timeout":5}`
	if r := a.call("ws-phoenix", tok, ping); !r.resp.Success {
		t.Fatalf("before the outage: %+v", r.resp)
	}
	for _, p := range all {
		if s := p.readyz(); s != 200 {
			t.Fatalf("%s /readyz = %d before the outage", p.name, s)
		}
	}

	e.srv.Stop()
	for _, p := range all {
		testwait.Until(t, 5*time.Second, func() bool { return p.readyz() == 503 }, "%s /readyz answering 503", p.name)
	}
	r := a.call("ws-phoenix", tok, ping)
	if r.err != nil || r.resp.Success || r.resp.Error != protocol.CodeBusUnavailable || r.elapsed > time.Second {
		t.Fatalf("call during the outage: %v %+v after %s, want bus_unavailable at once", r.err, r.resp, r.elapsed)
	}
	// Still down: readiness does not come back by itself.
	for _, p := range all {
		if s := p.readyz(); s != 503 {
			t.Fatalf("%s /readyz = %d while Redis is down", p.name, s)
		}
	}

	e.srv.Restart()
	for _, p := range all {
		testwait.Until(t, 15*time.Second, func() bool { return p.readyz() == 200 }, "%s /readyz answering 200", p.name)
	}
	b.waitLine(5*time.Second, "workspaces reannounced", `"workspaces":1`)
	// Ready means resubscribed: every call from now on gets through.
	for i := range 20 {
		r := []*brokerProc{a, c}[i%2].call("ws-phoenix", tok, fmt.Sprintf(`{"endpoint":"/api/ping","payload":{"after":%d},"timeout":5}`, i))
		if !r.resp.Success || compactJSON(t, r.resp.Result) != fmt.Sprintf(`{"after":%d}`, i) {
			t.Fatalf("call %d after Redis came back: %+v", i, r.resp)
		}
	}
	if r := b.call("ws-phoenix", tok, ping); !r.resp.Success {
		t.Fatalf("call on the owner after Redis came back: %+v", r.resp)
	}
}

// TestRedisGoCallersGetAnswers: a backend worker calls with the caller
// package, directly over Redis (caller.BusCaller) and over HTTP to another
// instance (caller.HTTP); both also ride out a workspace that connects
// only after the call was made (wait for workspace).
func TestRedisGoCallersGetAnswers(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	c := e.broker("c")
	startBridge(t, b, "ws-go")
	overRedis := e.busCaller()
	overHTTP := &caller.HTTP{BaseURL: a.url, Token: token(t, auth.RoleCaller, "*")}
	ctx := context.Background()
	for name, cl := range map[string]caller.Caller{"redis": overRedis, "http": overHTTP} {
		resp := cl.Call(ctx, caller.Request{WorkspaceID: "ws-go", Endpoint: "/api/ping", Payload: json.RawMessage(`{"from":"` + name + `"}`), Timeout: 5 * time.Second})
		if !resp.Success || compactJSON(t, resp.Result) != `{"from":"`+name+`"}` {
			t.Fatalf("%s caller got %+v", name, resp)
		}
		start := time.Now()
		resp = cl.Call(ctx, caller.Request{WorkspaceID: "ws-none", Endpoint: "/api/ping", Timeout: 30 * time.Second})
		if resp.Error != protocol.CodeWorkspaceOffline || time.Since(start) > 100*time.Millisecond {
			t.Fatalf("%s caller to an offline workspace got %+v after %s", name, resp, time.Since(start))
		}
	}
	if overRedis.Pending() != 0 {
		t.Fatalf("%d waiters left", overRedis.Pending())
	}

	// Wait for workspace: the calls are made while nobody serves ws-late;
	// its bridge then connects to C.
	results := make(chan string, 2)
	for name, cl := range map[string]caller.Caller{"redis": overRedis, "http": overHTTP} {
		go func() {
			resp := cl.Call(ctx, caller.Request{WorkspaceID: "ws-late", Endpoint: "/api/ping", Payload: json.RawMessage(`"` + name + `"`), Timeout: 15 * time.Second, WaitForWorkspace: 15 * time.Second})
			results <- fmt.Sprintf("%s %v %s %s", name, resp.Success, resp.Result, resp.Error)
		}()
	}
	// Both are held: the worker's waiter is registered, A logged the wait.
	testwait.Until(t, 5*time.Second, func() bool { return overRedis.Pending() == 1 }, "the Redis caller's call waiting (one waiter)")
	a.waitLine(5*time.Second, "waiting for workspace", `"workspace_id":"ws-late"`)
	startBridge(t, c, "ws-late")
	got := map[string]bool{}
	for range 2 {
		select {
		case s := <-results:
			got[s] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("held calls not answered after the workspace came online; got %v", got)
		}
	}
	for _, want := range []string{`redis true "redis" `, `http true "http" `} {
		if !got[want] {
			t.Fatalf("got %v, want %q", got, want)
		}
	}
}

// TestRedisBrokerFlagsAreChecked: the Redis flags fail clearly.
func TestRedisBrokerFlagsAreChecked(t *testing.T) {
	out, err := exec.Command(tetherBin, "broker", "--listen", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1", "--redis-cluster", "127.0.0.1:2").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "exclude each other") {
		t.Fatalf("--redis with --redis-cluster: %v %s", err, out)
	}
	start := time.Now()
	out, err = exec.Command(tetherBin, "broker", "--listen", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "connecting to redis") {
		t.Fatalf("unreachable redis: %v %s", err, out)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("unreachable redis refused after %s", el)
	}
}

// TestRedisClusterCallAcrossInstances: brokers on a Redis Cluster route over
// sharded pub/sub; a call on A reaches the workspace held by B.
func TestRedisClusterCallAcrossInstances(t *testing.T) {
	e := newClusterEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-shard")
	tok := token(t, auth.RoleCaller, "*")
	for i := range 5 {
		r := a.call("ws-shard", tok, fmt.Sprintf(`{"endpoint":"/api/ping","payload":{"i":%d},"timeout":5}`, i))
		if !r.resp.Success || compactJSON(t, r.resp.Result) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("call %d: %v %+v", i, r.err, r.resp)
		}
	}
	a.call("warmup", tok, `{"endpoint":"/x"}`)
	if r := a.call("ws-nobody", tok, `{"endpoint":"/api/ping"}`); r.resp.Error != protocol.CodeWorkspaceOffline || r.elapsed > 100*time.Millisecond {
		t.Fatalf("offline on the cluster: %+v after %s", r.resp, r.elapsed)
	}
	resp := e.busCaller().Call(context.Background(), caller.Request{WorkspaceID: "ws-shard", Endpoint: "/api/ping", Payload: json.RawMessage(`"sharded"`), Timeout: 5 * time.Second})
	if !resp.Success || string(resp.Result) != `"sharded"` {
		t.Fatalf("Go caller on the cluster got %+v", resp)
	}
	for _, p := range []*brokerProc{a, b} {
		if s := p.readyz(); s != 200 {
			t.Fatalf("%s /readyz = %d", p.name, s)
		}
	}
}

// python returns a Python 3 that has redis-py (Debian's python3-redis), or
// skips (fails under CI).
func python(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import redis").Run() == nil {
			return py
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no python3 with redis-py: install the Debian package python3-redis (make deps)")
	}
	t.Skip("no python3 with redis-py: install the Debian package python3-redis (make deps)")
	return ""
}

// TestRedisPythonExampleGetsAnswers runs examples/python/tether_call.py, the
// documented Redis-level client, against brokers on Redis: a call answered
// through another instance, an offline workspace, and a call that waits for
// its workspace to come online.
func TestRedisPythonExampleGetsAnswers(t *testing.T) {
	py := python(t)
	script, err := filepath.Abs("../examples/python/tether_call.py")
	if err != nil {
		t.Fatal(err)
	}
	e := newRedisEnv(t)
	e.broker("a")
	b := e.broker("b")
	c := e.broker("c")
	startBridge(t, b, "ws-py")
	run := func(args ...string) (protocol.ToolResponse, int) {
		t.Helper()
		cmd := exec.Command(py, append([]string{script, "--redis", e.srv.URL(), "--prefix", e.prefix}, args...)...)
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		code := exitCode(t, cmd)
		var resp protocol.ToolResponse
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
			t.Fatalf("tether_call.py printed %q (stderr %s): %v", out.String(), stderr.String(), err)
		}
		return resp, code
	}

	resp, code := run("--workspace", "ws-py", "--timeout", "5", "/api/ping", `{"hello":"python"}`)
	if code != 0 || !resp.Success || compactJSON(t, resp.Result) != `{"hello":"python"}` || resp.CorrelationID == "" {
		t.Fatalf("exit %d, %+v", code, resp)
	}
	resp, code = run("--workspace", "ws-nobody", "/api/ping")
	if code != 1 || resp.Error != protocol.CodeWorkspaceOffline {
		t.Fatalf("offline: exit %d, %+v", code, resp)
	}

	// --wait: the script says it waits; then the workspace connects on C.
	cmd := exec.Command(py, script, "--redis", e.srv.URL(), "--prefix", e.prefix, "--workspace", "ws-py-late", "--timeout", "15", "--wait", "/api/ping", `"late"`)
	cmd.SysProcAttr = proctree.DieWithParent(&syscall.SysProcAttr{}, syscall.SIGKILL)
	waiting := &signalWriter{want: "waiting for workspace ws-py-late", seen: make(chan struct{})}
	cmd.Stderr = waiting
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waiting.seen:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("tether_call.py --wait never said it waits; stderr: %s", waiting.String())
	}
	startBridge(t, c, "ws-py-late")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var resp protocol.ToolResponse
		if err != nil || json.Unmarshal(stdout.Bytes(), &resp) != nil || !resp.Success || string(resp.Result) != `"late"` {
			t.Fatalf("--wait: %v, printed %q", err, stdout.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("tether_call.py --wait not answered after the workspace came online")
	}
}

// signalWriter keeps what is written to it and closes seen once it holds
// want.
type signalWriter struct {
	want string
	seen chan struct{}

	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestRedisOwnerDecidedOutcomesReachTheCallerOnAnotherInstance: what the
// owner decides on its own — timeout, overloaded, broker_shutdown — reaches a
// caller on another instance as the single answer, in time.
func TestRedisOwnerDecidedOutcomesReachTheCallerOnAnotherInstance(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b", "--max-in-flight", "2", "--drain", "300ms")
	ide := connectIDE(t, b, "ws-owner", "none")
	tok := token(t, auth.RoleCaller, "ws-owner")

	// Timeout: decided by B at the deadline, well before A's own grace.
	r := a.call("ws-owner", tok, `{"endpoint":"/api/ping","timeout":0.5}`)
	if r.resp.Error != protocol.CodeTimeout || r.elapsed < 500*time.Millisecond || r.elapsed > 750*time.Millisecond {
		t.Fatalf("timeout: %+v after %s, want B's timeout at 0.5s", r.resp, r.elapsed)
	}
	ide.await("tool_cancel", time.Second)

	// Overloaded: two calls in flight at B, the third refused at once.
	var pending []<-chan callResult
	for range 2 {
		pending = append(pending, a.goCall("ws-owner", tok, `{"endpoint":"/api/ping","timeout":30}`))
		ide.await("tool_call", 5*time.Second)
	}
	r = a.call("ws-owner", tok, `{"endpoint":"/api/ping","timeout":30}`)
	if r.resp.Error != protocol.CodeOverloaded || r.elapsed > 100*time.Millisecond {
		t.Fatalf("third call: %+v after %s, want overloaded at once", r.resp, r.elapsed)
	}

	// Broker shutdown: B drains for 300ms, then answers what is left.
	start := time.Now()
	_ = syscall.Kill(b.cmd.Process.Pid, syscall.SIGTERM)
	for _, ch := range pending {
		r := await(t, ch, 3*time.Second)
		if r.resp.Error != protocol.CodeBrokerShutdown {
			t.Fatalf("pending call at shutdown: %+v", r.resp)
		}
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 1500*time.Millisecond {
		t.Fatalf("broker_shutdown after %s, want after the 300ms drain", el)
	}
	for _, p := range []*brokerProc{a} {
		if v := p.metric("tether_replies_dropped_total"); v != 0 {
			t.Errorf("%s dropped %v replies", p.name, v)
		}
	}
}

// TestRedisReplyToAGoneCallerIsDroppedAndCounted: a worker's call is pending
// at B when the worker goes away (its inbox is unsubscribed). When the client
// answers, B's reply reaches nobody: it is dropped, counted once in
// tether_replies_dropped_total, and not retried.
func TestRedisReplyToAGoneCallerIsDroppedAndCounted(t *testing.T) {
	e := newRedisEnv(t)
	b := e.broker("b")
	ide := connectIDE(t, b, "ws-orphan", "none")
	worker := e.busCaller()
	done := make(chan protocol.ToolResponse, 1)
	go func() {
		done <- worker.Call(context.Background(), caller.Request{WorkspaceID: "ws-orphan", Endpoint: "/api/ping", Timeout: 30 * time.Second})
	}()
	call := ide.await("tool_call", 5*time.Second)
	if err := worker.Close(); err != nil {
		t.Fatal(err)
	}
	if resp := <-done; resp.Error != protocol.CodeCallerClosed {
		t.Fatalf("closed worker's call got %+v", resp)
	}
	if v := b.metric("tether_replies_dropped_total"); v != 0 {
		t.Fatalf("dropped %v before the answer", v)
	}
	ide.send(map[string]any{"cmd": "answer", "correlation_id": call["correlation_id"], "via": "ack"})
	b.waitLine(5*time.Second, "reply reached no caller", call["correlation_id"].(string))
	testwait.Until(t, 5*time.Second, func() bool { return b.metric("tether_replies_dropped_total") == 1 }, "tether_replies_dropped_total 1 on /metrics")
	// Not retried: B publishes nothing more for it.
	if v := b.metric("tether_replies_dropped_total"); v != 1 {
		t.Fatalf("dropped counter %v, want 1", v)
	}
}

// TestRedisHolderThatMissedATakeoverYieldsAfterResubscribing: B's pub/sub
// connection goes silently dead (black-holed: Redis still counts it), and
// meanwhile a newer client for B's workspace connects on C, whose takeover B
// never hears. When B's self-ping notices and B resubscribes, it repeats its
// own takeover; C, holding the newer connection, reasserts, and B
// disconnects its client. From then on each call reaches one client.
func TestRedisHolderThatMissedATakeoverYieldsAfterResubscribing(t *testing.T) {
	e := newRedisEnv(t)
	proxy := redistest.StartProxy(t, e.srv.Addr())
	a := e.broker("a")
	b := startNamedBroker(t, "broker b", nil, "--instance-id", "b", "--redis", proxy.URL(), "--redis-prefix", e.prefix)
	c := e.broker("c")
	old := connectIDE(t, b, "ws-split", "ack")
	tok := token(t, auth.RoleCaller, "ws-split")
	if r := a.call("ws-split", tok, `{"endpoint":"/api/ping","timeout":5}`); !strings.Contains(string(r.resp.Result), `"via":"ack"`) {
		t.Fatalf("before: %+v", r.resp)
	}

	if n := proxy.BlackholeSubscribers(); n != 1 {
		t.Fatalf("black-holed %d connections, want B's pub/sub connection", n)
	}
	neu := connectIDE(t, c, "ws-split", "event")
	b.waitLine(10*time.Second, "workspaces reannounced", `"workspaces":1`)
	if ev := old.await("disconnect", 5*time.Second); ev["reason"] != "io server disconnect" {
		t.Fatalf("old client disconnected with %v", ev)
	}
	b.waitLine(time.Second, "connection closed", `"reason":"replaced"`)
	old.drainEvents()
	for i := range 20 {
		r := a.call("ws-split", tok, fmt.Sprintf(`{"endpoint":"/api/ping","timeout":5,"correlation_id":"after-%d"}`, i))
		if !r.resp.Success || !strings.Contains(string(r.resp.Result), `"via":"event"`) {
			t.Fatalf("call %d after B yielded: %+v", i, r.resp)
		}
	}
	for _, ev := range old.drainEvents() {
		if ev["event"] == "tool_call" {
			t.Fatalf("the replaced client still got %v", ev)
		}
	}
	if len(neu.drainEvents()) < 20 {
		t.Fatal("the new client did not get the calls")
	}
	if v := a.metric("tether_replies_dropped_total"); v != 0 {
		t.Errorf("A dropped %v replies: some call was answered twice", v)
	}
}

// listWorkspaces is GET /api/v1/workspaces on b with tok.
func listWorkspaces(t *testing.T, b *brokerProc, tok string) (list []protocol.Workspace, unanswered int, took time.Duration) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.url+"/api/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("listing workspaces on %s: %v", b.name, err)
	}
	defer res.Body.Close()
	took = time.Since(start)
	var body struct {
		Workspaces []protocol.Workspace `json:"workspaces"`
		Unanswered int                  `json:"unanswered_instances"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&body) != nil {
		t.Fatalf("listing workspaces on %s: HTTP %d", b.name, res.StatusCode)
	}
	return body.Workspaces, body.Unanswered, took
}

// TestRedisListShowsEveryInstancesWorkspaces: GET /api/v1/workspaces on any
// broker lists the workspaces of every instance on the Redis, each with the
// instance holding it, filtered by the token; an instance that hangs is
// reported as unanswered after about a second instead of holding the list.
func TestRedisListShowsEveryInstancesWorkspaces(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	c := e.broker("c")
	startBridge(t, a, "ws-list-a")
	startBridge(t, c, "ws-list-c")
	held := func(list []protocol.Workspace) map[string]string {
		m := map[string]string{}
		for _, w := range list {
			m[w.WorkspaceID] = w.Instance
		}
		return m
	}
	list, unanswered, _ := listWorkspaces(t, b, token(t, auth.RoleCaller, "*"))
	if got := held(list); len(got) != 2 || got["ws-list-a"] != "a" || got["ws-list-c"] != "c" || unanswered != 0 {
		t.Fatalf("list on b = %v (unanswered %d); want ws-list-a on a and ws-list-c on c", got, unanswered)
	}
	list, _, _ = listWorkspaces(t, b, token(t, auth.RoleCaller, "ws-list-c"))
	if got := held(list); len(got) != 1 || got["ws-list-c"] != "c" {
		t.Fatalf("list with a token for ws-list-c = %v; want only ws-list-c", got)
	}

	// c hangs: Redis still counts its subscription, it never answers.
	resume := c.pause()
	defer resume()
	list, unanswered, took := listWorkspaces(t, b, token(t, auth.RoleCaller, "*"))
	if got := held(list); len(got) != 1 || got["ws-list-a"] != "a" || unanswered != 1 {
		t.Fatalf("list with c stopped = %v (unanswered %d); want ws-list-a and 1 unanswered", got, unanswered)
	}
	if took > 2*time.Second {
		t.Fatalf("list with a hung instance took %v; want about a second", took)
	}
}

// TestRedisStalledClientDoesNotStallOtherWorkspaces: an IDE client on the
// owner stops reading its socket while large calls keep coming for it, so
// the owner's writes to it block. The owner writes calls on the goroutine
// that reads Redis; that reading must move on, so another workspace on the
// same owner keeps answering at once, and every call to the stalled client
// is answered once it goes.
func TestRedisStalledClientDoesNotStallOtherWorkspaces(t *testing.T) {
	e := newRedisEnv(t)
	a := e.broker("a")
	b := e.broker("b")
	startBridge(t, b, "ws-fine")

	// A client that connects and then never reads again.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(b.url, "http", "ws", 1)+"/socket.io/?EIO=4&transport=websocket", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if _, _, err := ws.Read(ctx); err != nil { // open packet
		t.Fatal(err)
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(`40{"token":"`+token(t, auth.RoleBridge, "ws-stalled")+`","workspace_id":"ws-stalled"}`)); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := ws.Read(ctx); err != nil || !strings.HasPrefix(string(msg), "40") {
		t.Fatalf("CONNECT ack: %q, %v", msg, err)
	}
	testwait.Until(t, 10*time.Second, func() bool { return b.holds("ws-stalled") }, "%s holding ws-stalled", b.name)

	// 48 calls of 900 kB: far more than the socket buffers hold.
	tok := token(t, auth.RoleCaller, "*")
	big := `{"endpoint":"/api/ping","timeout":20,"payload":"` + strings.Repeat("x", 900_000) + `"}`
	var stalled []<-chan callResult
	for range 48 {
		stalled = append(stalled, a.goCall("ws-stalled", tok, big))
	}
	b.waitLine(10*time.Second, "call delivered to socket", `"workspace_id":"ws-stalled"`)
	// Every stalled call is in a's one publishing pipe before the first
	// call to ws-fine, so that call's answer means Redis delivered all 48 to
	// b while ws-stalled was still held there. (Left to chance, a stalled
	// call whose 900 kB body a read late went out after the client left and
	// was rightly answered workspace_offline.)
	testwait.Until(t, 20*time.Second, func() bool {
		return countLines(a.proc, `"message":"call routed"`, `"workspace_id":"ws-stalled"`) >= len(stalled)
	}, "broker a routing all %d stalled calls", len(stalled))

	for i := range 20 {
		r := a.call("ws-fine", tok, fmt.Sprintf(`{"endpoint":"/api/ping","payload":{"n":%d},"timeout":5}`, i))
		if !r.resp.Success {
			t.Fatalf("call %d to ws-fine while ws-stalled blocks: %+v", i, r.resp)
		}
		// A reader blocked behind the stalled write would hold these until
		// the call's 5 s timeout; the bound leaves room for the 43 MB that
		// Redis delivers to the owner ahead of the first of them, which a
		// loaded machine takes a while to read.
		if r.elapsed > 2500*time.Millisecond {
			t.Fatalf("call %d to ws-fine took %v while ws-stalled blocks", i, r.elapsed)
		}
	}

	// The stalled client goes: every call to it, delivered or still
	// waiting behind the blocked write, is answered at once.
	_ = ws.CloseNow()
	closed := time.Now()
	for i, ch := range stalled {
		r := await(t, ch, 25*time.Second)
		if r.resp.Error != protocol.CodeWorkspaceDisconnected {
			t.Fatalf("stalled call %d: %+v; want workspace_disconnected", i, r.resp)
		}
	}
	if took := time.Since(closed); took > 3*time.Second {
		t.Fatalf("calls to the stalled client answered %v after it went; want at once", took)
	}
}
