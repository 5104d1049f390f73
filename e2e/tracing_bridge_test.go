package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/otlptest"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// Traces through the bridge (issue 31): `tether bridge` exports its spans
// over OTLP/HTTP to the endpoint OTEL_EXPORTER_OTLP_ENDPOINT names, here an
// in-test receiver (internal/otlptest).

// tracedBridge runs `tether bridge` for ws behind b, also serving its
// routes on a local HTTP listener, with env added (the OTEL_* variables).
// It returns the bridge, its listener's address and its token.
func tracedBridge(t *testing.T, b *brokerProc, ws, root string, env ...string) (p *proc, addr, httpToken string) {
	t.Helper()
	runDir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(tetherBin, "bridge", "--broker", b.url, "--workspace", ws, "--token", token(t, auth.RoleBridge, ws),
		"--root", root, "--http", "127.0.0.1:0", "--log-level", "debug")
	cmd.Env = append(append(os.Environ(), "XDG_RUNTIME_DIR="+runDir), env...)
	p = start(t, "bridge "+ws, cmd)
	p.waitLine(10*time.Second, "tracing on", "tether-bridge")
	var ev struct {
		Addr string `json:"addr"`
	}
	if err := json.Unmarshal([]byte(p.waitLine(10*time.Second, "http listener started")), &ev); err != nil || ev.Addr == "" {
		t.Fatal("no HTTP address in the bridge's log")
	}
	testwait.Until(t, 10*time.Second, func() bool { return b.holds(ws) }, "%s holding %s", b.name, ws)
	path, err := bridge.TokenFile(filepath.Join(runDir, "tether"), ev.Addr)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return p, ev.Addr, strings.TrimSpace(string(raw))
}

// postTraced posts a call to the bridge's local listener, with traceparent
// when not empty.
func postTraced(t *testing.T, addr, tok, endpoint, traceparent, body string) protocol.ToolResponse {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+endpoint, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set(bridge.HeaderTimeout, "60")
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var resp protocol.ToolResponse
	if err := json.NewDecoder(res.Body).Decode(&resp); err != nil {
		t.Fatalf("HTTP %d: not a ToolResponse: %v", res.StatusCode, err)
	}
	return resp
}

// TestBridgeExportsATreeOfSpansOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT
// set, the bridge exports a tether.bridge.call server span for a call from
// the broker and for a call on its local listener, the latter continuing
// the caller's Traceparent header; a terminal command is a terminal.exec
// span under its call, and a debug session's requests are dap.<command>
// client spans under the start-session call. Every span carries the
// bridge's resource (tether-bridge, <workspace>@<host>, its version); no
// attribute carries payload text.
func TestBridgeExportsATreeOfSpansOverOTLP(t *testing.T) {
	rcv := otlptest.Start(t)
	b := startBroker(t) // tracing off
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"add.js": "function add(a, b) {\n  const s = a + b;\n  return s;\n}\nconsole.log(add(2, 3));\n"})
	ws := "ws-otel"
	_, addr, tok := tracedBridge(t, b, ws, root, "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=100")

	// Through the broker, over the socket.
	r := b.call(ws, token(t, auth.RoleCaller, ws), `{"endpoint":"/api/terminal/execute","payload":{"command":"echo secret-out-1; exit 2","hidden":true},"timeout":20}`)
	if r.err != nil || !r.resp.Success {
		t.Fatalf("terminal call through the broker: %+v", r)
	}
	// On the local listener, continuing a caller's trace.
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	resp := postTraced(t, addr, tok, protocol.DebugStartEndpoint, "00-"+traceID+"-"+parentID+"-01",
		`{"language":"javascript","program":"add.js","args":["secret-arg-2"],"breakpoints":[{"path":"add.js","breakpoints":[{"line_content":"return s;"}]}]}`)
	if !resp.Success {
		t.Fatalf("start-session on the local listener: %+v", resp)
	}
	var started struct {
		SessionID string `json:"session_id"`
	}
	_ = json.Unmarshal(resp.Result, &started)
	if stop := postTraced(t, addr, tok, protocol.DebugStopEndpoint, "", fmt.Sprintf(`{"session_id":%q}`, started.SessionID)); !stop.Success {
		t.Fatalf("stop-session: %+v", stop)
	}

	var socketCall, debugCall otlptest.Span
	testwait.Until(t, 10*time.Second, func() bool {
		socketCall, debugCall = otlptest.Span{}, otlptest.Span{}
		for _, s := range rcv.Named("tether.bridge.call") {
			switch {
			case s.Attributes["tether.transport"] == "socket" && s.Attributes["tether.endpoint"] == protocol.TerminalExecuteEndpoint:
				socketCall = s
			case s.Attributes["tether.endpoint"] == protocol.DebugStartEndpoint:
				debugCall = s
			}
		}
		return socketCall.SpanID != "" && debugCall.SpanID != "" && len(rcv.Named("terminal.exec")) > 0
	}, "the call spans and the terminal.exec span at the receiver")

	host, _ := os.Hostname()
	for _, s := range rcv.Spans() {
		if s.Resource["service.name"] != "tether-bridge" || s.Resource["service.instance.id"] != ws+"@"+host || s.Resource["service.version"] == "" {
			t.Errorf("span %s has resource %v, want tether-bridge, %s@%s and a version", s.Name, s.Resource, ws, host)
		}
		for k, v := range s.Attributes {
			for _, secret := range []string{"secret-out-1", "secret-arg-2", "echo", "add.js"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s = %q holds payload text", s.Name, k, v)
				}
			}
		}
	}
	if socketCall.Kind != "server" || socketCall.Attributes["tether.workspace_id"] != ws || socketCall.Attributes["tether.outcome"] != "success" ||
		socketCall.Attributes["tether.correlation_id"] == "" {
		t.Errorf("socket call span %+v, want a server span naming the workspace, correlation id and success", socketCall)
	}
	exec := rcv.Named("terminal.exec")[0]
	if exec.ParentSpanID != socketCall.SpanID || exec.TraceID != socketCall.TraceID || exec.Attributes["process.exit.code"] != "2" ||
		exec.Attributes["tether.exec.runtime"] != "hidden" || !exec.StatusError {
		t.Errorf("terminal.exec %+v, want exit code 2 in a hidden terminal, an error, under the call %s", exec, socketCall.SpanID)
	}
	if debugCall.TraceID != traceID || debugCall.ParentSpanID != parentID || debugCall.Attributes["tether.transport"] != "local_http" {
		t.Errorf("start-session span %+v, want trace %s under the caller's span %s", debugCall, traceID, parentID)
	}
	dap := map[string]bool{}
	for _, s := range rcv.Spans() {
		if strings.HasPrefix(s.Name, "dap.") && s.ParentSpanID == debugCall.SpanID {
			if s.TraceID != traceID || s.Kind != "client" || s.Attributes["dap.adapter"] != "node" || s.Attributes["dap.outcome"] != "success" {
				t.Errorf("%s %+v, want a successful client span of the node adapter in the caller's trace", s.Name, s)
			}
			dap[s.Name] = true
		}
	}
	for _, name := range []string{"dap.initialize", "dap.launch", "dap.setBreakpoints", "dap.configurationDone"} {
		if !dap[name] {
			t.Errorf("no %s span under start-session (saw %v)", name, dap)
		}
	}
}

// TestBridgeTracingToAnUnreachableEndpointNeitherSlowsCallsNorExit: spans
// for an OTLP endpoint that refuses connections, or accepts them and never
// answers, are dropped: calls are answered as fast as without tracing (the
// export runs off the call path, behind a bounded queue) and the bridge
// exits promptly on SIGTERM (its last flush is bounded by 5s).
func TestBridgeTracingToAnUnreachableEndpointNeitherSlowsCallsNorExit(t *testing.T) {
	for _, tc := range []struct {
		name string
		// exitLine is what the bridge says at exit of what it lost.
		exitLine string
		endpoint func(t *testing.T) string
	}{
		{"refused", "spans_dropped", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ln.Close() // nothing listens there now
			return "http://" + ln.Addr().String()
		}},
		// An export still waiting at exit is cut off: the flush failed.
		{"silent", "spans still queued at exit could not be exported", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			// Accepts, reads nothing, answers nothing.
			var conns []net.Conn
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					conns = append(conns, c)
				}
			}()
			t.Cleanup(func() {
				ln.Close()
				<-done
				for _, c := range conns {
					c.Close()
				}
			})
			return "http://" + ln.Addr().String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := tc.endpoint(t)
			b := startBroker(t)
			p, addr, tok := tracedBridge(t, b, "ws-otel-dead", t.TempDir(), "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint,
				"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_BSP_MAX_QUEUE_SIZE=64")
			start := time.Now()
			for i := range 300 {
				if resp := postTraced(t, addr, tok, protocol.PingEndpoint, "", fmt.Sprintf(`{"n":%d}`, i)); !resp.Success {
					t.Fatalf("ping %d: %+v", i, resp)
				}
			}
			took := time.Since(start)
			t.Logf("300 pings with the OTLP endpoint %s: %v", tc.name, took)
			if took > 5*time.Second {
				t.Errorf("300 pings took %v, want well under 5s", took)
			}
			stopped := time.Now()
			p.stop(syscall.SIGTERM, 15*time.Second)
			exit := time.Since(stopped)
			t.Logf("exit after SIGTERM: %v", exit)
			if exit > 8*time.Second {
				t.Errorf("the bridge took %v to exit with spans it could not export, want at most its 5s flush bound and a margin", exit)
			}
			// No /metrics on the bridge: its exit says what it lost.
			t.Logf("%s", p.waitLine(time.Second, tc.exitLine))
		})
	}
}
