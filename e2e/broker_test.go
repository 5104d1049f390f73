package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

func TestTetherCallPingThroughBrokerAndBridge(t *testing.T) {
	b := startBroker(t)
	startBridge(t, b, "ws-ping")
	out, err := exec.Command(tetherBin, "call", "--broker", b.url, "--token", token(t, auth.RoleCaller, "ws-ping"),
		"--workspace", "ws-ping", "--timeout", "5", "/api/ping", `{"hello":"tether"}`).Output()
	if err != nil {
		t.Fatalf("tether call: %v\n%s", err, out)
	}
	var resp protocol.ToolResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("tether call printed %q: %v", out, err)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, resp.Result)
	if !resp.Success || compact.String() != `{"hello":"tether"}` {
		t.Fatalf("got %+v (result %s)", resp, resp.Result)
	}
	// A failed call exits 1 and still prints the response.
	cmd := exec.Command(tetherBin, "call", "--broker", b.url, "--token", token(t, auth.RoleCaller, "ws-ping"),
		"--workspace", "ws-ping", "/api/no-such-route")
	out, err = cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("failed call exited %v, want 1", err)
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.Error != protocol.CodeUnknownRoute {
		t.Fatalf("failed call printed %q", out)
	}
}

func TestSocketIOClientAnswersByAck(t *testing.T) {
	b := startBroker(t)
	ide := connectIDE(t, b, "ws-ack", "ack")
	r := b.call("ws-ack", token(t, auth.RoleCaller, "ws-ack"), `{"endpoint":"/api/ping","payload":{"n":1},"timeout":5}`)
	if r.status != 200 || !r.resp.Success || !strings.Contains(string(r.resp.Result), `"via":"ack"`) || !strings.Contains(string(r.resp.Result), `"n":1`) {
		t.Fatalf("got %d %+v", r.status, r.resp)
	}
	ev := ide.await("tool_call", time.Second)
	if ev["endpoint"] != "/api/ping" || ev["has_ack"] != true {
		t.Fatalf("client saw %v", ev)
	}
}

func TestSocketIOClientAnswersByToolResponseEvent(t *testing.T) {
	b := startBroker(t)
	connectIDE(t, b, "ws-ev", "event")
	r := b.call("ws-ev", token(t, auth.RoleCaller, "ws-ev"), `{"endpoint":"/api/ping","payload":{"n":2},"timeout":5}`)
	if r.status != 200 || !r.resp.Success || !strings.Contains(string(r.resp.Result), `"via":"event"`) {
		t.Fatalf("got %d %+v", r.status, r.resp)
	}
}

func TestEmptyAckThenEventAnswersOnce(t *testing.T) {
	b := startBroker(t)
	connectIDE(t, b, "ws-empty", "empty-ack-then-event")
	r := b.call("ws-empty", token(t, auth.RoleCaller, "ws-empty"), `{"endpoint":"/api/ping","timeout":5}`)
	if !r.resp.Success || !strings.Contains(string(r.resp.Result), `"via":"event"`) {
		t.Fatalf("an empty ack answered the call: %+v", r.resp)
	}
}

func TestDuplicateAnswersDroppedAndCounted(t *testing.T) {
	b := startBroker(t)
	connectIDE(t, b, "ws-dup", "both") // answers by event, then by ack
	tok := token(t, auth.RoleCaller, "ws-dup")
	for range 5 {
		r := b.call("ws-dup", tok, `{"endpoint":"/api/ping","timeout":5}`)
		if !r.resp.Success || !strings.Contains(string(r.resp.Result), `"via":"event"`) {
			t.Fatalf("got %+v, want the first answer (event)", r.resp)
		}
	}
	testwait.Until(t, 5*time.Second, func() bool { return b.metric("tether_unmatched_answers_total") == 5 }, "tether_unmatched_answers_total 5 on /metrics")
}

func TestOfflineWorkspaceAnsweredUnder100ms(t *testing.T) {
	b := startBroker(t)
	tok := token(t, auth.RoleCaller, "*")
	b.call("warmup", tok, `{"endpoint":"/x"}`) // first request pays for the TCP connect
	r := b.call("ws-nobody", tok, `{"endpoint":"/api/ping","timeout":30}`)
	if r.resp.Error != protocol.CodeWorkspaceOffline || r.status != 200 {
		t.Fatalf("got %d %+v", r.status, r.resp)
	}
	if r.elapsed >= 100*time.Millisecond {
		t.Fatalf("offline answered after %s", r.elapsed)
	}
}

func TestDisconnectAnsweredUnder500ms(t *testing.T) {
	b := startBroker(t)
	ide := connectIDE(t, b, "ws-drop", "none")
	tok := token(t, auth.RoleCaller, "ws-drop")
	var pending []<-chan callResult
	for range 3 {
		pending = append(pending, b.goCall("ws-drop", tok, `{"endpoint":"/api/ping","timeout":30}`))
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

func TestTimeoutAnsweredWithinTimeoutPlus250msAndCancelSent(t *testing.T) {
	b := startBroker(t)
	ide := connectIDE(t, b, "ws-slow", "none")
	r := b.call("ws-slow", token(t, auth.RoleCaller, "ws-slow"), `{"endpoint":"/api/ping","timeout":0.5}`)
	if r.resp.Error != protocol.CodeTimeout {
		t.Fatalf("got %+v", r.resp)
	}
	if r.elapsed < 500*time.Millisecond || r.elapsed > 750*time.Millisecond {
		t.Fatalf("timeout answered after %s, want within 0.5s + 250ms", r.elapsed)
	}
	call := ide.await("tool_call", time.Second)
	cancel := ide.await("tool_cancel", time.Second)
	if cancel["correlation_id"] != call["correlation_id"] || cancel["reason"] != "timeout" {
		t.Fatalf("tool_cancel %v for call %v", cancel, call)
	}
}

func TestOverloadedAboveInFlightBound(t *testing.T) {
	b := startBroker(t, "--max-in-flight", "3")
	ide := connectIDE(t, b, "ws-busy", "none")
	tok := token(t, auth.RoleCaller, "ws-busy")
	for range 3 {
		b.goCall("ws-busy", tok, `{"endpoint":"/api/ping","timeout":2}`)
		ide.await("tool_call", 5*time.Second)
	}
	r := b.call("ws-busy", tok, `{"endpoint":"/api/ping","timeout":2}`)
	if r.resp.Error != protocol.CodeOverloaded || r.elapsed > 100*time.Millisecond {
		t.Fatalf("fourth call got %+v after %s, want overloaded at once", r.resp, r.elapsed)
	}
}

func TestShutdownDrainsThenAnswersBrokerShutdown(t *testing.T) {
	b := startBroker(t, "--drain", "500ms")
	ide := connectIDE(t, b, "ws-term", "none")
	tok := token(t, auth.RoleCaller, "ws-term")
	drained := b.goCall("ws-term", tok, `{"endpoint":"/api/ping","timeout":30}`)
	first := ide.await("tool_call", 5*time.Second)
	stuck := b.goCall("ws-term", tok, `{"endpoint":"/api/ping","timeout":30}`)
	ide.await("tool_call", 5*time.Second)
	start := time.Now()
	_ = syscall.Kill(b.cmd.Process.Pid, syscall.SIGTERM)
	b.waitLine(5*time.Second, "draining")
	// Answered during the drain: delivered.
	ide.send(map[string]any{"cmd": "answer", "correlation_id": first["correlation_id"], "via": "ack"})
	if r := await(t, drained, 2*time.Second); !r.resp.Success {
		t.Fatalf("call answered during the drain got %+v", r.resp)
	}
	r := await(t, stuck, 3*time.Second)
	if r.resp.Error != protocol.CodeBrokerShutdown {
		t.Fatalf("unanswered call got %+v", r.resp)
	}
	if el := time.Since(start); el < 450*time.Millisecond || el > 1500*time.Millisecond {
		t.Fatalf("broker_shutdown after %s, want after the 500ms drain", el)
	}
	ide.await("disconnect", 3*time.Second)
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		t.Fatal("broker did not exit after SIGTERM")
	}
	if code := b.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("broker exited %d after SIGTERM", code)
	}
}

func TestEveryCallAnsweredExactlyOnce(t *testing.T) {
	b := startBroker(t, "--log-level", "info")
	connectIDE(t, b, "ws-many", "alternate")
	tok := token(t, auth.RoleCaller, "ws-many")
	const n = 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for i := range n {
		wg.Go(func() {
			cid := fmt.Sprintf("c-%d", i)
			r := b.call("ws-many", tok, `{"endpoint":"/api/ping","timeout":10,"correlation_id":"`+cid+`","payload":{"i":`+fmt.Sprint(i)+`}}`)
			if r.err != nil || !r.resp.Success || r.resp.CorrelationID != cid || !strings.Contains(string(r.resp.Result), fmt.Sprintf(`"i":%d}`, i)) {
				t.Errorf("call %s: %v %+v", cid, r.err, r.resp)
			}
			mu.Lock()
			seen[cid]++
			mu.Unlock()
		})
	}
	wg.Wait()
	for cid, k := range seen {
		if k != 1 {
			t.Errorf("%s answered %d times", cid, k)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d calls answered", len(seen), n)
	}
}

func TestReplacedConnectionIsDisconnected(t *testing.T) {
	b := startBroker(t)
	old := connectIDE(t, b, "ws-swap", "ack")
	connectIDE(t, b, "ws-swap", "event")
	ev := old.await("disconnect", 3*time.Second)
	if ev["reason"] != "io server disconnect" {
		t.Fatalf("old client disconnected with %v", ev)
	}
	r := b.call("ws-swap", token(t, auth.RoleCaller, "ws-swap"), `{"endpoint":"/api/ping","timeout":5}`)
	if !strings.Contains(string(r.resp.Result), `"via":"event"`) {
		t.Fatalf("call not served by the newer connection: %+v", r.resp)
	}
}

func TestMalformedPacketClosesOnlyThatConnection(t *testing.T) {
	b := startBroker(t)
	connectIDE(t, b, "ws-good", "ack")
	tok := token(t, auth.RoleCaller, "*")
	for _, frame := range []string{"x", "4", `42{"not":"an array"}`, `43abc`, "40garbage"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ws, _, err := websocket.Dial(ctx, strings.Replace(b.url, "http", "ws", 1)+"/socket.io/?EIO=4&transport=websocket", nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		_, _, _ = ws.Read(ctx) // open packet
		if frame != "40garbage" {
			_ = ws.Write(ctx, websocket.MessageText, []byte(`40{"token":"`+token(t, auth.RoleBridge, "ws-bad")+`","workspace_id":"ws-bad"}`))
			_, _, _ = ws.Read(ctx)
		}
		_ = ws.Write(ctx, websocket.MessageText, []byte(frame))
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				if ctx.Err() != nil {
					t.Fatalf("broker kept the connection open after %q", frame)
				}
				break
			}
		}
		_ = ws.CloseNow()
		cancel()
		if r := b.call("ws-good", tok, `{"endpoint":"/api/ping","timeout":5}`); !r.resp.Success {
			t.Fatalf("after malformed %q the good workspace got %+v", frame, r.resp)
		}
	}
}

func TestPayloadOverMaxPayloadRefused(t *testing.T) {
	b := startBroker(t, "--max-payload", "10000")
	connectIDE(t, b, "ws-big", "ack")
	tok := token(t, auth.RoleCaller, "ws-big")
	r := b.call("ws-big", tok, `{"endpoint":"/api/ping","payload":"`+strings.Repeat("x", 20000)+`"}`)
	if r.status != http.StatusRequestEntityTooLarge || r.resp.Error != protocol.CodePayloadTooLarge {
		t.Fatalf("got %d %+v", r.status, r.resp)
	}
	if r := b.call("ws-big", tok, `{"endpoint":"/api/ping","payload":"small"}`); !r.resp.Success {
		t.Fatalf("a small call after the refused one got %+v", r.resp)
	}
}

func TestBadRequestsGetClearErrors(t *testing.T) {
	b := startBroker(t)
	tok := token(t, auth.RoleCaller, "*")
	for name, body := range map[string]string{
		"invalid json":      `{"endpoint":`,
		"missing endpoint":  `{"payload":{}}`,
		"timeout below 0.1": `{"endpoint":"/api/ping","timeout":0.05}`,
		"timeout above 600": `{"endpoint":"/api/ping","timeout":601}`,
		"unknown field":     `{"endpoint":"/api/ping","timout":5}`,
	} {
		r := b.call("ws-x", tok, body)
		if r.status != http.StatusBadRequest || r.resp.Error != protocol.CodeInvalidRequest || r.resp.Message == "" {
			t.Errorf("%s: got %d %+v", name, r.status, r.resp)
		}
		if name == "unknown field" && !strings.Contains(r.resp.Message, `unknown field "timout" (did you mean "timeout"?)`) {
			t.Errorf("unknown field: message %q", r.resp.Message)
		}
	}
}

func TestBrokenClientDoesNotAffectOtherWorkspaces(t *testing.T) {
	b := startBroker(t)
	connectIDE(t, b, "ws-steady", "ack")
	flaky := connectIDE(t, b, "ws-flaky", "none")
	tok := token(t, auth.RoleCaller, "*")
	pending := b.goCall("ws-flaky", tok, `{"endpoint":"/api/ping","timeout":30}`)
	flaky.await("tool_call", 5*time.Second)
	_ = flaky.proc.Process.Kill()
	if r := await(t, pending, 2*time.Second); r.resp.Error != protocol.CodeWorkspaceDisconnected {
		t.Fatalf("flaky call got %+v", r.resp)
	}
	for range 20 {
		if r := b.call("ws-steady", tok, `{"endpoint":"/api/ping","timeout":5}`); !r.resp.Success {
			t.Fatalf("steady workspace got %+v", r.resp)
		}
	}
}

func TestBridgeReconnectsAfterBrokerRestart(t *testing.T) {
	b := startBroker(t)
	addr := strings.TrimPrefix(b.url, "http://")
	startBridge(t, b, "ws-phoenix")
	b.stop(syscall.SIGKILL, 5*time.Second)
	b2 := startBrokerOn(t, addr)
	testwait.Until(t, 15*time.Second, func() bool { return b2.holds("ws-phoenix") }, "%s holding ws-phoenix", b2.name)
	if r := b2.call("ws-phoenix", token(t, auth.RoleCaller, "ws-phoenix"), `{"endpoint":"/api/ping","payload":{"back":true}}`); !r.resp.Success {
		t.Fatalf("after the restart got %+v", r.resp)
	}
}

func TestBrokerRefusesPublicAddressWithoutSecret(t *testing.T) {
	out, err := exec.Command(tetherBin, "broker", "--listen", "0.0.0.0:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "without --secret") {
		t.Fatalf("broker on 0.0.0.0 without a secret: %v %s", err, out)
	}
}

func TestUpPrintsACallThatWorks(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command(tetherBin, "up", "--listen", "127.0.0.1:0", "--root", root)
	printed := &syncBuffer{}
	cmd.Stdout = printed
	start(t, "up", cmd)
	var line string
	if !testwait.Within(10*time.Second, func() bool {
		line = printed.line(" call --broker ")
		return line != ""
	}) {
		t.Fatalf("tether up printed no call:\n%s", printed.String())
	}
	out, err := exec.Command("sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("pasted call %q failed: %v\n%s", line, err, out)
	}
	if !strings.Contains(string(out), `"success": true`) || !strings.Contains(string(out), `"hello": "tether"`) {
		t.Fatalf("pasted call printed %s", out)
	}
}

func TestSocketIOClientWithDefaultTransportsPollsThenUpgrades(t *testing.T) {
	b := startBroker(t)
	ide, first := startIDE(t, b, "ws-default", token(t, auth.RoleBridge, "ws-default"), "alternate", "--transports", "default")
	// The session opens over polling and upgrades at once, in either order
	// with the Socket.IO connect.
	seen := map[any]map[string]any{first["event"]: first}
	for seen["connected"] == nil || seen["upgrade"] == nil {
		ev := ide.next(5 * time.Second)
		seen[ev["event"]] = ev
	}
	if seen["upgrade"]["transport"] != "websocket" {
		t.Fatalf("upgrade event %v", seen["upgrade"])
	}
	tok := token(t, auth.RoleCaller, "ws-default")
	for i := range 4 {
		if r := b.call("ws-default", tok, `{"endpoint":"/api/ping","timeout":5,"payload":{"i":`+fmt.Sprint(i)+`}}`); !r.resp.Success {
			t.Fatalf("call %d after the upgrade: %+v", i, r.resp)
		}
	}
}

func TestSocketIOClientOnPollingOnly(t *testing.T) {
	b := startBroker(t, "--ping-interval", "300ms", "--ping-timeout", "300ms")
	ide, first := startIDE(t, b, "ws-poll", token(t, auth.RoleBridge, "ws-poll"), "ack", "--transports", "polling")
	if first["event"] != "connected" || first["transport"] != "polling" {
		t.Fatalf("got %v", first)
	}
	tok := token(t, auth.RoleCaller, "ws-poll")
	for i := range 5 {
		if r := b.call("ws-poll", tok, `{"endpoint":"/api/ping","timeout":5}`); !r.resp.Success {
			t.Fatalf("call %d over polling: %+v", i, r.resp)
		}
	}
	// Several ping intervals pass: pongs over POST keep the session alive.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if r := b.call("ws-poll", tok, `{"endpoint":"/api/ping","timeout":5}`); !r.resp.Success {
			t.Fatalf("polling session dropped: %+v", r.resp)
		}
		time.Sleep(100 * time.Millisecond) // pacing: the calls spread over the ping intervals; nothing is awaited
	}
	// The client leaving ends the session.
	ide.send(map[string]any{"cmd": "disconnect"})
	ide.await("disconnect", 3*time.Second)
	testwait.Until(t, 2*time.Second, func() bool { return !b.holds("ws-poll") }, "%s no longer holding ws-poll", b.name)
}

func TestPythonSocketIOClientWithDefaultTransportsAnswers(t *testing.T) {
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if exec.Command("/usr/bin/python3", "-c", "import socketio").Run() != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3-socketio is not installed (make deps installs it)")
		}
		t.Skip("python3-socketio is not installed; run make deps")
	}
	b := startBroker(t)
	cmd := exec.Command("/usr/bin/python3", "ide_client.py", b.url, token(t, auth.RoleBridge, "ws-py"), "ws-py")
	cmd.Dir = clientsDir(t)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.Contains(lines.Text(), `"connected"`) {
		t.Fatalf("python-socketio did not connect: %q", lines.Text())
	}
	r := b.call("ws-py", token(t, auth.RoleCaller, "ws-py"), `{"endpoint":"/api/ping","payload":{"from":"go"},"timeout":5}`)
	if !r.resp.Success || !strings.Contains(string(r.resp.Result), `"via":"python-socketio"`) || !strings.Contains(string(r.resp.Result), `"from":"go"`) {
		t.Fatalf("got %+v", r.resp)
	}
}
