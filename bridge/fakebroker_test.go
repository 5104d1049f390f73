//go:build !windows

package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/protocol"
)

// fakeBrokerForTest stands in for the broker package, which is being written
// in parallel: it speaks only the server half of the handshake (Engine.IO
// open, the answer to CONNECT) and hands every accepted connection to the
// test, which then plays the broker frame by frame. It checks nothing about
// the bridge by itself.
type fakeBrokerForTest struct {
	t    testing.TB
	srv  *httptest.Server
	open protocol.OpenInfo

	// answer returns the reply to the n-th CONNECT (n from 1): a raw
	// Socket.IO frame such as `44{…}`, or "" to accept. upgrade returns the
	// HTTP status to refuse the n-th upgrade with, or 0 to accept. Both are
	// set before the bridge starts.
	answer  func(n int) string
	upgrade func(n int) int

	attempts chan fakeAttempt      // one per upgrade request
	conns    chan *fakeConnForTest // one per accepted CONNECT

	mu       sync.Mutex
	n        int
	upgrades int
	sockets  []*websocket.Conn
	handlers sync.WaitGroup
}

// fakeAttempt records one connection attempt as the broker saw it.
type fakeAttempt struct {
	at     time.Time
	path   string
	query  string
	header http.Header
}

// fakeConnForTest is one accepted connection, driven by the test.
type fakeConnForTest struct {
	t      testing.TB
	ws     *websocket.Conn
	auth   map[string]string // the CONNECT payload
	header http.Header
	frames chan string   // text frames from the bridge after CONNECT
	closed chan struct{} // closed when reading from the bridge failed
}

func newFakeBroker(t testing.TB, open protocol.OpenInfo) *fakeBrokerForTest {
	t.Helper()
	if open.SID == "" {
		open.SID = "fake-eio-sid"
	}
	if open.PingInterval == 0 {
		open.PingInterval = 25000
		open.PingTimeout = 20000
	}
	if open.MaxPayload == 0 {
		open.MaxPayload = 1_000_000
	}
	f := &fakeBrokerForTest{
		t:        t,
		open:     open,
		attempts: make(chan fakeAttempt, 100),
		conns:    make(chan *fakeConnForTest, 100),
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serveHTTP))
	t.Cleanup(f.close)
	return f
}

// url is the broker's base URL, as an operator would give it.
func (f *fakeBrokerForTest) url() string { return f.srv.URL }

func (f *fakeBrokerForTest) close() {
	f.srv.Close()
	f.mu.Lock()
	for _, ws := range f.sockets {
		_ = ws.CloseNow()
	}
	f.mu.Unlock()
	f.handlers.Wait()
}

func (f *fakeBrokerForTest) serveHTTP(w http.ResponseWriter, r *http.Request) {
	f.handlers.Add(1)
	defer f.handlers.Done()
	// Never block the handler on a test that stopped listening (a bridge
	// that reconnects in a loop): tests look at the first few only.
	select {
	case f.attempts <- fakeAttempt{at: time.Now(), path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone()}:
	default:
	}
	f.mu.Lock()
	f.upgrades++
	u := f.upgrades
	f.mu.Unlock()
	if f.upgrade != nil {
		if status := f.upgrade(u); status != 0 {
			http.Error(w, http.StatusText(status), status)
			return
		}
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.sockets = append(f.sockets, ws)
	f.n++
	n := f.n
	f.mu.Unlock()
	defer ws.CloseNow()
	ws.SetReadLimit(-1)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, protocol.EncodeOpen(f.open)); err != nil {
		return
	}
	_, data, err := ws.Read(ctx)
	if err != nil {
		return
	}
	if !strings.HasPrefix(string(data), "40") {
		f.t.Errorf("first packet from the bridge = %q, want CONNECT", data)
		return
	}
	auth := map[string]string{}
	if err := json.Unmarshal(data[2:], &auth); err != nil {
		f.t.Errorf("CONNECT payload %q: %v", data[2:], err)
	}
	reply := ""
	if f.answer != nil {
		reply = f.answer(n)
	}
	if reply != "" {
		_ = ws.Write(ctx, websocket.MessageText, append([]byte("4"), reply...))
		_ = ws.Close(websocket.StatusNormalClosure, "")
		return
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf(`40{"sid":"fake-sio-%d"}`, n))); err != nil {
		return
	}
	fc := &fakeConnForTest{
		t:      f.t,
		ws:     ws,
		auth:   auth,
		header: r.Header.Clone(),
		frames: make(chan string, 1024),
		closed: make(chan struct{}),
	}
	select {
	case f.conns <- fc:
	default:
	}
	defer close(fc.closed)
	for {
		typ, data, err := ws.Read(context.Background())
		if err != nil {
			return
		}
		if typ == websocket.MessageText {
			select {
			case fc.frames <- string(data):
			default:
				f.t.Errorf("fake broker: frame buffer full, dropped %q", data)
			}
		}
	}
}

// accept waits for the next accepted connection.
func (f *fakeBrokerForTest) accept(t testing.TB) *fakeConnForTest {
	t.Helper()
	return recv(t, f.conns, "the bridge to connect")
}

// send writes a raw text frame to the bridge.
func (c *fakeConnForTest) send(t testing.TB, frame string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		t.Fatalf("fake broker: sending %q: %v", frame, err)
	}
}

// sendBinary writes a raw binary frame to the bridge.
func (c *fakeConnForTest) sendBinary(t testing.TB, frame []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageBinary, frame); err != nil {
		t.Fatalf("fake broker: sending binary frame: %v", err)
	}
}

// call sends a tool_call event with ack id ackID (protocol.NoAck for none).
func (c *fakeConnForTest) call(t testing.TB, ackID int64, call protocol.ToolCall) {
	t.Helper()
	c.send(t, string(protocol.EncodeEvent(ackID, protocol.EventToolCall, mustJSON(t, call))))
}

// cancel sends a tool_cancel event.
func (c *fakeConnForTest) cancel(t testing.TB, correlationID, reason string) {
	t.Helper()
	c.send(t, string(protocol.EncodeEvent(protocol.NoAck, protocol.EventToolCancel,
		mustJSON(t, protocol.ToolCancel{CorrelationID: correlationID, Reason: reason}))))
}

// next waits for the next text frame from the bridge.
func (c *fakeConnForTest) next(t testing.TB) string {
	t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-c.closed:
		select {
		case f := <-c.frames:
			return f
		default:
		}
		t.Fatalf("fake broker: connection closed while waiting for a frame")
	case <-time.After(waitLimit):
		t.Fatalf("fake broker: no frame from the bridge")
	}
	panic("unreachable")
}

// response waits for the next frame and decodes it as a call's response: an
// ACK (ackID >= 0) or a tool_response event (ackID == protocol.NoAck).
func (c *fakeConnForTest) response(t testing.TB) (ackID int64, resp protocol.ToolResponse) {
	t.Helper()
	frame := c.next(t)
	pkt, err := protocol.DecodeEIO([]byte(frame))
	if err != nil || pkt.Type != protocol.EIOMessage {
		t.Fatalf("frame %q is not a message: %v", frame, err)
	}
	p, err := protocol.DecodeSIO(pkt.Data)
	if err != nil {
		t.Fatalf("frame %q: %v", frame, err)
	}
	args, err := p.Args()
	if err != nil {
		t.Fatalf("frame %q: %v", frame, err)
	}
	switch p.Type {
	case protocol.SIOAck:
		if len(args) != 1 {
			t.Fatalf("ack %q carries %d arguments, want 1", frame, len(args))
		}
	case protocol.SIOEvent:
		name, _ := p.EventName()
		if name != protocol.EventToolResponse || len(args) != 2 || p.HasAck() {
			t.Fatalf("frame %q is not a tool_response event", frame)
		}
		args = args[1:]
	default:
		t.Fatalf("frame %q is neither an ACK nor an event", frame)
	}
	resp, ok, err := protocol.DecodeResponse(args[0])
	if err != nil || !ok {
		t.Fatalf("frame %q does not carry a response (ok=%v, err=%v)", frame, ok, err)
	}
	return p.ID, resp
}

// waitClosed waits until the bridge's side of the connection is gone.
func (c *fakeConnForTest) waitClosed(t testing.TB) {
	t.Helper()
	recv(t, c.closed, "the connection to close")
}
