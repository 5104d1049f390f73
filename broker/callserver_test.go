package broker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// rawCaller is one keep-alive TCP connection to the broker's server, for
// writing requests byte for byte and reading their answers in order.
type rawCaller struct {
	t  *testing.T
	nc net.Conn
	rd *bufio.Reader
}

func (e *env) dialCaller() *rawCaller {
	e.t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = nc.Close() })
	return &rawCaller{t: e.t, nc: nc, rd: bufio.NewReader(nc)}
}

// callRequest is the HTTP/1.1 request of a call to ws with body.
func callRequest(ws, token, body string, headers ...string) string {
	h := ""
	for _, l := range headers {
		h += l + "\r\n"
	}
	return fmt.Sprintf("POST /api/v1/workspaces/%s/calls HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer %s\r\n%sContent-Length: %d\r\n\r\n%s", ws, token, h, len(body), body)
}

func (c *rawCaller) write(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatal(err)
	}
}

// answer reads the next answer, within 5s.
func (c *rawCaller) answer() (*http.Response, []byte) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer func() { _ = c.nc.SetReadDeadline(time.Time{}) }()
	res, err := http.ReadResponse(c.rd, nil)
	if err != nil {
		c.t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("reading the answer's body: %v", err)
	}
	return res, body
}

// toolResponse reads the next answer, which must be HTTP 200 with a
// ToolResponse.
func (c *rawCaller) toolResponse() protocol.ToolResponse {
	c.t.Helper()
	res, body := c.answer()
	var resp protocol.ToolResponse
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &resp) != nil {
		c.t.Fatalf("answer %d %s, want 200 with a ToolResponse", res.StatusCode, body)
	}
	return resp
}

// waitClosed waits (up to within) for the server to close the connection.
func (c *rawCaller) waitClosed(within time.Duration) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(within))
	if _, err := c.rd.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("connection still open after %s (read: %v)", within, err)
	}
}

func TestCallServerAnswersCallsOnItsOwnConnection(t *testing.T) {
	e := newEnv(t)
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	c := e.dialCaller()
	tok := e.token(auth.RoleCaller, "ws1")
	for i := range 3 {
		c.write(callRequest("ws1", tok, fmt.Sprintf(`{"endpoint":"/n%d","payload":{"i":%d}}`, i, i)))
		r := client.nextCall()
		if r.call.Endpoint != fmt.Sprintf("/n%d", i) {
			t.Fatalf("call %d reached the client as %s", i, r.call.Endpoint)
		}
		client.ackOK(r, fmt.Sprintf(`{"i":%d}`, i))
		res, body := c.answer()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" || res.Header.Get("Date") == "" || res.Close {
			t.Fatalf("answer %d: %d %v", i, res.StatusCode, res.Header)
		}
		if want := fmt.Sprintf(`{"correlation_id":"%s","success":true,"result":{"i":%d}}`, r.call.CorrelationID, i); string(body) != want {
			t.Fatalf("answer %d: %s, want %s", i, body, want)
		}
	}
	if n := broker.CallsServedForTest(e.srv.Server); n != 3 {
		t.Fatalf("the call server served %d requests, want the 3 calls", n)
	}
}

// TestCallServerAnswersPipelinedCallsInOrder: a client may send calls
// without waiting; each is delivered once the one before is answered.
func TestCallServerAnswersPipelinedCallsInOrder(t *testing.T) {
	e := newEnv(t)
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	c := e.dialCaller()
	tok := e.token(auth.RoleCaller, "ws1")
	c.write(callRequest("ws1", tok, `{"endpoint":"/a"}`) + callRequest("ws1", tok, `{"endpoint":"/b"}`) + callRequest("ws1", tok, `{"endpoint":"/c"}`))
	for _, ep := range []string{"/a", "/b", "/c"} {
		r := client.nextCall()
		if r.call.Endpoint != ep {
			t.Fatalf("client got %s, want %s", r.call.Endpoint, ep)
		}
		select {
		case f := <-client.frames:
			t.Fatalf("the next call came before %s was answered: %s", ep, f)
		case <-time.After(50 * time.Millisecond):
		}
		client.ackOK(r, `"`+ep+`"`)
		if resp := c.toolResponse(); string(resp.Result) != `"`+ep+`"` {
			t.Fatalf("answer %s, want %s's", resp.Result, ep)
		}
	}
}

// TestCallServerHandsOtherRequestsToNetHTTP: on one connection, a call,
// then a request the call server does not take (net/http answers it, and
// everything after it), then a call again.
func TestCallServerHandsOtherRequestsToNetHTTP(t *testing.T) {
	e := newEnv(t)
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	c := e.dialCaller()
	tok := e.token(auth.RoleCaller, "ws1")
	c.write(callRequest("ws1", tok, `{"endpoint":"/x"}`))
	client.ackOK(client.nextCall(), `"ok"`)
	if resp := c.toolResponse(); !resp.Success {
		t.Fatalf("first call: %+v", resp)
	}
	c.write("GET /api/v1/workspaces HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer " + tok + "\r\n\r\n")
	res, body := c.answer()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"workspace_id":"ws1"`) {
		t.Fatalf("list: %d %s", res.StatusCode, body)
	}
	c.write(callRequest("ws1", tok, `{"endpoint":"/y"}`))
	client.ackOK(client.nextCall(), `"ok"`)
	if resp := c.toolResponse(); !resp.Success {
		t.Fatalf("call after the list: %+v", resp)
	}
	if n := broker.CallsServedForTest(e.srv.Server); n != 1 {
		t.Fatalf("the call server served %d requests, want the first call only", n)
	}
}

// TestCallServerRefusalsMatchNetHTTPs: a refused call gets the same
// status and error code whichever server read it.
func TestCallServerRefusalsMatchNetHTTPs(t *testing.T) {
	e := newEnv(t, func(c *broker.Config) { c.MaxPayload = 1000 })
	tok := e.token(auth.RoleCaller, "ws1")
	other := e.token(auth.RoleCaller, "ws2")
	for name, tc := range map[string]struct {
		request string
		status  int
		code    string
	}{
		"no token":        {callRequest("ws1", "", `{"endpoint":"/x"}`), 401, protocol.CodeUnauthorized},
		"other workspace": {callRequest("ws1", other, `{"endpoint":"/x"}`), 403, protocol.CodeForbidden},
		"bad json":        {callRequest("ws1", tok, `{"endpoint":`), 400, protocol.CodeInvalidRequest},
		"unknown field":   {callRequest("ws1", tok, `{"endpoint":"/x","bogus":1}`), 400, protocol.CodeInvalidRequest},
		"key on sync":     {callRequest("ws1", tok, `{"endpoint":"/x"}`, "Idempotency-Key: k"), 400, protocol.CodeInvalidRequest},
		"too large":       {callRequest("ws1", tok, `{"endpoint":"/x","payload":"`+strings.Repeat("p", 1000)+`"}`), 413, protocol.CodePayloadTooLarge},
		"offline":         {callRequest("ws1", tok, `{"endpoint":"/x"}`), 200, protocol.CodeWorkspaceOffline},
	} {
		t.Run(name, func(t *testing.T) {
			c := e.dialCaller()
			c.write(tc.request)
			res, body := c.answer()
			var resp protocol.ToolResponse
			_ = json.Unmarshal(body, &resp)
			if res.StatusCode != tc.status || resp.Error != tc.code || resp.Message == "" {
				t.Fatalf("answer %d %s, want %d %s with a message", res.StatusCode, body, tc.status, tc.code)
			}
			// And through net/http, the request being its first: a
			// Transfer-Encoding the call server declines.
			req, _ := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.request)))
			raw, _ := io.ReadAll(req.Body)
			hreq, _ := http.NewRequest(http.MethodPost, e.srv.URL+req.URL.Path, strings.NewReader(string(raw)))
			hreq.Header = req.Header
			hreq.TransferEncoding = []string{"chunked"}
			hres, err := http.DefaultClient.Do(hreq)
			if err != nil {
				t.Fatal(err)
			}
			hbody, _ := io.ReadAll(hres.Body)
			_ = hres.Body.Close()
			var hresp protocol.ToolResponse
			_ = json.Unmarshal(hbody, &hresp)
			if hres.StatusCode != res.StatusCode || hresp.Error != resp.Error {
				t.Fatalf("net/http answers %d %s; the call server %d %s", hres.StatusCode, hbody, res.StatusCode, body)
			}
		})
	}
}

// TestCallServerCancelsTheCallWhenItsCallerGoes: the caller's connection
// closing is a cancel: the client is told to stop at once.
func TestCallServerCancelsTheCallWhenItsCallerGoes(t *testing.T) {
	e := newEnv(t)
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	c := e.dialCaller()
	c.write(callRequest("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/slow","timeout":30}`))
	r := client.nextCall()
	start := time.Now()
	_ = c.nc.Close()
	tc := client.wantCancel(r.call.CorrelationID)
	if took := time.Since(start); took > time.Second || !strings.Contains(tc.Reason, "caller gone") {
		t.Fatalf("tool_cancel %+v after %s, want caller gone within 1s", tc, took)
	}
	// The call left the table: an answer now is one for no call.
	client.ackOK(r, `1`)
	testwait.Until(t, 5*time.Second, func() bool { return broker.InFlightForTest(e.broker) == 0 }, "the cancelled call to leave the call table")
}

// TestCallServerReadsAHeadThatComesInPieces and closes one that does not
// come whole within the header timeout.
func TestCallServerReadsAHeadThatComesInPieces(t *testing.T) {
	e := newEnv(t)
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	c := e.dialCaller()
	req := callRequest("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/pieces"}`)
	for i := 0; i < len(req); i += 7 {
		c.write(req[i:min(i+7, len(req))])
		time.Sleep(time.Millisecond) // the subject: a head that comes in pieces over time
	}
	r := client.nextCall()
	client.ackOK(r, `"whole"`)
	if resp := c.toolResponse(); string(resp.Result) != `"whole"` {
		t.Fatalf("answer %+v", resp)
	}
}

// TestCallServerKeepsAHeadItsBodyMoved: a request whose body is still
// coming when the buffer must make room for it (here behind a pipelined
// call that filled most of the buffer) is moved to the buffer's start, and
// its body is then read over where its head was: the head's values (the
// token) are read where they are now, not where they were.
func TestCallServerKeepsAHeadItsBodyMoved(t *testing.T) {
	e := newEnv(t)
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	c := e.dialCaller()
	tok := e.token(auth.RoleCaller, "ws1")
	first := callRequest("ws1", tok, `{"endpoint":"/first","payload":"`+strings.Repeat("a", 3000)+`"}`)
	second := callRequest("ws1", tok, `{"endpoint":"/second","payload":"`+strings.Repeat("b", 3600)+`"}`)
	cut := strings.Index(second, "\r\n\r\n") + 4 + 100 // the head and the body's first bytes
	c.write(first + second[:cut])
	r := client.nextCall()
	if r.call.Endpoint != "/first" {
		t.Fatalf("client got %s, want /first", r.call.Endpoint)
	}
	client.ackOK(r, `"first"`)
	if resp := c.toolResponse(); string(resp.Result) != `"first"` {
		t.Fatalf("first answer %+v", resp)
	}
	c.write(second[cut:])
	r = client.nextCall()
	if r.call.Endpoint != "/second" {
		t.Fatalf("client got %s, want /second", r.call.Endpoint)
	}
	client.ackOK(r, `"second"`)
	if resp := c.toolResponse(); !resp.Success || string(resp.Result) != `"second"` {
		t.Fatalf("second answer %+v", resp)
	}
}

func TestCallServerClosesAHeadThatDoesNotComeWhole(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := broker.NewServer(e.broker, &http.Server{ReadHeaderTimeout: 200 * time.Millisecond})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &rawCaller{t: t, nc: nc, rd: bufio.NewReader(nc)}
	c.write("POST /api/v1/workspaces/ws1/calls HTTP/1.1\r\nHost: bro")
	start := time.Now()
	c.waitClosed(3 * time.Second)
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("closed after %s, before the header timeout", took)
	}
}

// TestCallServerClosesAfterConnectionClose: an answer to a request with
// Connection: close says so, and the connection ends after it.
func TestCallServerClosesAfterConnectionClose(t *testing.T) {
	e := newEnv(t)
	c := e.dialCaller()
	c.write(callRequest("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x"}`, "Connection: close"))
	res, _ := c.answer()
	if !res.Close {
		t.Fatalf("answer to Connection: close has headers %v", res.Header)
	}
	c.waitClosed(2 * time.Second)
}

// TestCallServerShutdownEndsIdleConnections: Shutdown closes keep-alive
// connections that wait for a request, and Serve returns.
func TestCallServerShutdownEndsIdleConnections(t *testing.T) {
	e := newEnv(t)
	c := e.dialCaller()
	c.write(callRequest("ws1", e.token(auth.RoleCaller, "ws1"), `{"endpoint":"/x"}`))
	if resp := c.toolResponse(); resp.Error != protocol.CodeWorkspaceOffline {
		t.Fatalf("answer %+v", resp)
	}
	done := make(chan struct{})
	go func() { e.srv.Close(); close(done) }()
	c.waitClosed(2 * time.Second)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}

// TestCallServerSlowReaderHoldsNoOtherAnswer: a caller that does not read
// its answer, larger than the sockets can hold, delays nobody else's
// answer from the same workspace.
func TestCallServerSlowReaderHoldsNoOtherAnswer(t *testing.T) {
	const size = 24 << 20 // over loopback's send and receive buffers together
	e := newEnv(t, func(c *broker.Config) { c.MaxPayload = size + 1000 })
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	tok := e.token(auth.RoleCaller, "ws1")
	slow := e.dialCaller()
	slow.write(callRequest("ws1", tok, `{"endpoint":"/big"}`))
	r := client.nextCall()
	client.ackOK(r, `"`+strings.Repeat("b", size)+`"`)
	// Once the call table has handed the large answer out, its writing
	// is the slow caller's connection's business alone.
	testwait.Until(t, 30*time.Second, func() bool { return broker.InFlightForTest(e.broker) == 0 }, "the large answer to leave the call table")
	fast := e.dialCaller()
	for i := range 3 {
		start := time.Now()
		fast.write(callRequest("ws1", tok, `{"endpoint":"/small"}`))
		r := client.nextCall()
		client.ackOK(r, fmt.Sprint(i))
		if resp := fast.toolResponse(); string(resp.Result) != fmt.Sprint(i) {
			t.Fatalf("answer %+v", resp)
		}
		// Held behind the large answer, it would wait for that write's
		// timeout (WriteTimeout, 10 s); half of it leaves room for a
		// loaded machine (a -race run beside others took 1.02 s once).
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("a small call took %s behind the unread large answer", took)
		}
	}
	if resp := slow.toolResponse(); len(resp.Result) != size+2 {
		t.Fatalf("the large answer came back with %d bytes", len(resp.Result))
	}
}

// TestCallServerServesTheAsyncAPI: an async submit, a wait for its call
// and a cancel, on one connection, all read and answered by the call
// server.
func TestCallServerServesTheAsyncAPI(t *testing.T) {
	e := newEnv(t)
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	tok := e.token(auth.RoleCaller, "ws1")
	c := e.dialCaller()
	c.write(callRequest("ws1", tok, `{"endpoint":"/a","async":true}`))
	res, body := c.answer()
	var rec struct {
		CorrelationID string `json:"correlation_id"`
		Status        string `json:"status"`
	}
	if err := json.Unmarshal(body, &rec); err != nil || res.StatusCode != http.StatusAccepted || res.Header.Get("Location") != "/api/v1/calls/"+rec.CorrelationID {
		t.Fatalf("submit: %d %v %s", res.StatusCode, res.Header, body)
	}
	r := client.nextCall()
	status := func(query string) (int, string) {
		c.write("GET /api/v1/calls/" + rec.CorrelationID + query + " HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " + tok + "\r\n\r\n")
		res, body := c.answer()
		var now struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(body, &now)
		return res.StatusCode, now.Status
	}
	if code, st := status("?wait=0.2"); code != http.StatusOK || st != "delivered" {
		t.Fatalf("wait of 0.2s on a delivered call: %d %s", code, st)
	}
	if code, _ := status("?wait=99"); code != http.StatusBadRequest {
		t.Fatalf("wait of 99s: %d, want 400", code)
	}
	c.write("POST /api/v1/calls/" + rec.CorrelationID + "/cancel HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " + tok + "\r\nContent-Length: 0\r\n\r\n")
	if res, body := c.answer(); res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"cancelled"`) {
		t.Fatalf("cancel: %d %s", res.StatusCode, body)
	}
	client.wantCancel(r.call.CorrelationID)
	if code, st := status(""); code != http.StatusOK || st != "cancelled" {
		t.Fatalf("status after the cancel: %d %s", code, st)
	}
	if n := broker.CallsServedForTest(e.srv.Server); n != 5 {
		t.Fatalf("the call server served %d requests, want all 5", n)
	}
}

// TestCallServerShutdownLeavesNoGoroutine: once the broker and its server
// are shut down, nothing they started runs: connections of both servers,
// the requests' workers, net/http's.
func TestCallServerShutdownLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, err := broker.New(broker.Config{Secret: testSecret, Logger: zerolog.Nop(), DrainTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveBroker(t, b)
	e := &env{t: t, broker: b, srv: srv, api: srv.URL}
	client := e.connect("ws1", e.token(auth.RoleBridge, "ws1"))
	tok := e.token(auth.RoleCaller, "ws1")
	c := e.dialCaller()
	c.write(callRequest("ws1", tok, `{"endpoint":"/x"}`))
	client.ackOK(client.nextCall(), "1")
	c.toolResponse()
	c.write(callRequest("ws1", tok, `{"endpoint":"/y","async":true}`, "Prefer: respond-async, wait=5"))
	client.ackOK(client.nextCall(), "2")
	if res, _ := c.answer(); res.StatusCode != http.StatusOK {
		t.Fatalf("submit with wait: %d", res.StatusCode)
	}
	c.write(callRequest("ws1", tok, `{"endpoint":"/z"}`)) // in flight at shutdown
	client.nextCall()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if resp := c.toolResponse(); resp.Error != protocol.CodeBrokerShutdown {
		t.Fatalf("call in flight at shutdown: %+v", resp)
	}
	start := time.Now()
	srv.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the server's shutdown took %s", took)
	}
	_ = c.nc.Close()
	_ = client.ws.CloseNow()
	<-client.closed
}
