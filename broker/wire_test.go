package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker"
	"github.com/tetherdev/tether/broker/api"
	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

var testSecret = []byte("test-secret-0123456789")

type env struct {
	t      *testing.T
	broker *broker.Broker
	srv    *testServer
	// api is the URL calls go to: srv's, or another broker's on the same
	// bus (eachPath's "other instance").
	api string
}

func newEnv(t *testing.T, mutate ...func(*broker.Config)) *env {
	t.Helper()
	cfg := broker.Config{Secret: testSecret, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := broker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveBroker(t, b)
	e := &env{t: t, broker: b, srv: srv, api: srv.URL}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
		srv.Close()
	})
	return e
}

// testServer serves a broker as the command does (broker.Server: the call
// server for POST .../calls, net/http for the rest) on a loopback port.
type testServer struct {
	*api.Server
	URL  string
	done chan error
	once sync.Once
}

func serveBroker(t *testing.T, b *broker.Broker) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: broker.NewServer(b, &http.Server{}), URL: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	go func() { ts.done <- ts.Serve(ln) }()
	return ts
}

// Close shuts the server down (once) and waits for Serve to return.
func (ts *testServer) Close() {
	ts.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ts.Shutdown(ctx)
		if err := <-ts.done; err != http.ErrServerClosed {
			panic(fmt.Sprintf("broker.Server.Serve: %v", err))
		}
	})
}

func (e *env) token(role string, ws ...string) string {
	e.t.Helper()
	tok, err := auth.IssueToken(testSecret, role, ws, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

func (e *env) wsURL() string {
	return "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/socket.io/?EIO=4&transport=websocket"
}

// wireClient is a raw Engine.IO/Socket.IO client for driving the broker
// frame by frame. It is not a fake of anything: the real socket.io-client
// runs in the e2e tests; this one can also misbehave on purpose.
type wireClient struct {
	t      *testing.T
	noPong bool
	ws     *websocket.Conn
	frames chan []byte // every text frame after the handshake, except pings
	closed chan struct{}
	pings  atomic.Int32 // pings received
}

// dialRaw opens the WebSocket and reads the open packet.
func (e *env) dialRaw() *wireClient { return e.dialWith(nil, false) }

// dialWith dials with extra headers; noPong makes the client ignore pings.
func (e *env) dialWith(h http.Header, noPong bool) *wireClient {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.wsURL(), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(-1)
	c := &wireClient{t: e.t, ws: ws, noPong: noPong, frames: make(chan []byte, 1024), closed: make(chan struct{})}
	go c.readLoop()
	e.t.Cleanup(func() { _ = ws.CloseNow(); <-c.closed })
	open := c.next()
	if open[0] != '0' {
		e.t.Fatalf("first frame %q is not an open packet", open)
	}
	return c
}

// connect opens a client and completes CONNECT for ws with token.
func (e *env) connect(ws, token string) *wireClient {
	e.t.Helper()
	c := e.dialRaw()
	c.send(`40{"token":"` + token + `","workspace_id":"` + ws + `"}`)
	if f := c.next(); !strings.HasPrefix(string(f), `40{"sid":`) {
		e.t.Fatalf("CONNECT answered %q", f)
	}
	return c
}

func (c *wireClient) readLoop() {
	defer close(c.closed)
	for {
		_, data, err := c.ws.Read(context.Background())
		if err != nil {
			return
		}
		if string(data) == "2" {
			c.pings.Add(1)
			if c.noPong {
				continue
			}
			_ = c.ws.Write(context.Background(), websocket.MessageText, []byte("3"))
			continue
		}
		c.frames <- data
	}
}

func (c *wireClient) send(frame string) {
	c.t.Helper()
	// A bound on the test's own write, not a promise of the broker's: a
	// 24 MB answer read under -race beside other builds took over 5 s.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		c.t.Fatalf("send %q: %v", frame, err)
	}
}

func (c *wireClient) next() []byte {
	c.t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-c.closed:
		select { // frames read before the close still count
		case f := <-c.frames:
			return f
		default:
		}
		c.t.Fatal("connection closed while waiting for a frame")
	case <-time.After(5 * time.Second):
		c.t.Fatal("no frame within 5s")
	}
	return nil
}

// waitClosed waits for the broker to close the connection.
func (c *wireClient) waitClosed(within time.Duration) {
	c.t.Helper()
	for {
		select {
		case <-c.frames:
		case <-c.closed:
			return
		case <-time.After(within):
			c.t.Fatalf("connection still open after %s", within)
		}
	}
}

type received struct {
	ack  int64
	call protocol.ToolCall
}

// nextEvent returns the next EVENT's name, ack id and argument.
func (c *wireClient) nextEvent() (string, int64, json.RawMessage) {
	c.t.Helper()
	for {
		f := c.next()
		if f[0] != '4' {
			continue
		}
		p, err := protocol.DecodeSIO(f[1:])
		if err != nil {
			c.t.Fatalf("broker sent malformed packet %q: %v", f, err)
		}
		if p.Type != protocol.SIOEvent {
			continue
		}
		args, _ := p.Args()
		name, _ := p.EventName()
		var arg json.RawMessage
		if len(args) > 1 {
			arg = args[1]
		}
		return name, p.ID, arg
	}
}

func (c *wireClient) nextCall() received {
	c.t.Helper()
	for {
		name, ack, arg := c.nextEvent()
		if name != protocol.EventToolCall {
			continue
		}
		var call protocol.ToolCall
		if err := json.Unmarshal(arg, &call); err != nil {
			c.t.Fatal(err)
		}
		return received{ack: ack, call: call}
	}
}

// wantCancel reads the next event, which must be the tool_cancel of call
// cid, and returns it.
func (c *wireClient) wantCancel(cid string) protocol.ToolCancel {
	c.t.Helper()
	name, _, arg := c.nextEvent()
	var tc protocol.ToolCancel
	_ = json.Unmarshal(arg, &tc)
	if name != protocol.EventToolCancel || tc.CorrelationID != cid {
		c.t.Fatalf("client got %s %s, want the tool_cancel of %s", name, arg, cid)
	}
	return tc
}

func (c *wireClient) ackOK(r received, result string) {
	c.send(string(protocol.EncodeAck(r.ack, json.RawMessage(`{"correlation_id":"`+r.call.CorrelationID+`","success":true,"result":`+result+`}`))))
}

// httpCall posts a call to e.api and returns the HTTP status and decoded
// response.
func (e *env) httpCall(ws, token, body string) (int, protocol.ToolResponse) {
	e.t.Helper()
	return e.httpCallTo(e.api, ws, token, body)
}

// httpCallTo is httpCall to the broker at url.
func (e *env) httpCallTo(url, ws, token, body string) (int, protocol.ToolResponse) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/workspaces/"+ws+"/calls", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("http call: %v", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var resp protocol.ToolResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		e.t.Fatalf("response %q is not a ToolResponse: %v", raw, err)
	}
	return res.StatusCode, resp
}

type callResult struct {
	status  int
	resp    protocol.ToolResponse
	elapsed time.Duration
}

// goCall runs httpCall in the background.
func (e *env) goCall(ws, token, body string) <-chan callResult {
	out := make(chan callResult, 1)
	start := time.Now()
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.api+"/api/v1/workspaces/"+ws+"/calls", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- callResult{status: -1}
			return
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var resp protocol.ToolResponse
		_ = json.NewDecoder(bytes.NewReader(raw)).Decode(&resp)
		out <- callResult{status: res.StatusCode, resp: resp, elapsed: time.Since(start)}
	}()
	return out
}

func awaitResult(t *testing.T, ch <-chan callResult, within time.Duration) callResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("call not answered within %s", within)
		return callResult{}
	}
}
