package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/broker/auth"
	"github.com/tetherdev/tether/protocol"
)

// Helpers of the security suite (security_test.go): a raw Engine.IO
// client for frames no real client sends, long-polling by hand, dialing
// from a chosen loopback address, and a steady caller that measures how
// another workspace fares meanwhile.

// deep is n nested arrays.
func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// steady keeps calling a workspace through the HTTP API while a test does
// something to someone else, and records the slowest answer.
type steady struct {
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	calls int
	worst time.Duration
	fails []string
}

func startSteady(t *testing.T, b *brokerProc, ws string) *steady {
	t.Helper()
	s := &steady{stop: make(chan struct{}), done: make(chan struct{})}
	tok := token(t, auth.RoleCaller, ws)
	go func() {
		defer close(s.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			r := b.call(ws, tok, `{"endpoint":"/api/ping","payload":{"steady":true},"timeout":10}`)
			s.mu.Lock()
			s.calls++
			s.worst = max(s.worst, r.elapsed)
			if r.err != nil || !r.resp.Success {
				s.fails = append(s.fails, fmt.Sprintf("%v %+v", r.err, r.resp))
			}
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-s.stop:
		default:
			close(s.stop)
		}
		<-s.done
	})
	return s
}

// count is how many calls were answered so far.
func (s *steady) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// check stops the calls and fails unless every one succeeded within bound.
func (s *steady) check(t *testing.T, bound time.Duration) {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fails) > 0 {
		t.Fatalf("the steady workspace's calls failed meanwhile: %v", s.fails)
	}
	if s.calls == 0 || s.worst > bound {
		t.Fatalf("the steady workspace: %d calls, slowest %s, want every answer within %s", s.calls, s.worst, bound)
	}
	t.Logf("steady workspace meanwhile: %d calls, slowest %s", s.calls, s.worst)
}

// wireConn is a raw Engine.IO/Socket.IO client over a WebSocket, for
// frames no real client would send. It answers pings.
type wireConn struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan string
	closed chan struct{}
}

// dialWire opens a WebSocket session from local (an address of the
// machine, "" for any) and reads the open packet.
func dialWire(t *testing.T, brokerURL, local string, header http.Header) *wireConn {
	t.Helper()
	ws, res, err := dialWS(brokerURL, local, header)
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial: HTTP %d %v", status, err)
	}
	ws.SetReadLimit(-1)
	c := &wireConn{t: t, ws: ws, frames: make(chan string, 1<<16), closed: make(chan struct{})}
	go func() {
		defer close(c.closed)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			if string(data) == "2" {
				_ = ws.Write(context.Background(), websocket.MessageText, []byte("3"))
				continue
			}
			select {
			case c.frames <- string(data):
			default: // nobody reads: drop
			}
		}
	}()
	t.Cleanup(func() { _ = ws.CloseNow(); <-c.closed })
	if open := c.next(5 * time.Second); !strings.HasPrefix(open, "0{") {
		t.Fatalf("first frame %q is not an open packet", open)
	}
	return c
}

func dialWS(brokerURL, local string, header http.Header) (*websocket.Conn, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := &websocket.DialOptions{HTTPHeader: header}
	if local != "" {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		opts.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	return websocket.Dial(ctx, strings.Replace(brokerURL, "http", "ws", 1)+"/socket.io/?EIO=4&transport=websocket", opts)
}

// dialFrom opens a WebSocket session from local and closes it, returning
// the HTTP status (101 when it was accepted), Retry-After and body.
func dialFrom(t *testing.T, brokerURL, local string) (int, string, string) {
	t.Helper()
	ws, res, err := dialWS(brokerURL, local, nil)
	if err == nil {
		_ = ws.CloseNow()
		return http.StatusSwitchingProtocols, "", ""
	}
	if res == nil {
		t.Fatalf("dial from %s: %v", local, err)
	}
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), string(body)
}

// connectedWire dials and CONNECTs for ws.
func connectedWire(t *testing.T, b *brokerProc, ws string) *wireConn {
	t.Helper()
	c := dialWire(t, b.url, "", nil)
	if f := c.connect(token(t, auth.RoleBridge, ws), ws); !strings.HasPrefix(f, `40{"sid"`) {
		t.Fatalf("CONNECT for %s answered %q", ws, f)
	}
	return c
}

// connect sends CONNECT (token "" leaves it out) and returns the answer.
func (c *wireConn) connect(tok, ws string) string {
	c.t.Helper()
	auth := map[string]string{"workspace_id": ws}
	if tok != "" {
		auth["token"] = tok
	}
	body, _ := json.Marshal(auth)
	c.send("40" + string(body))
	return c.next(5 * time.Second)
}

func (c *wireConn) send(frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		c.t.Fatalf("send %.40q: %v", frame, err)
	}
}

func (c *wireConn) next(within time.Duration) string {
	c.t.Helper()
	select {
	case f := <-c.frames:
		return f
	case <-time.After(within):
		c.t.Fatalf("no frame within %s", within)
		return ""
	}
}

// nextMatching skips frames until one containing part.
func (c *wireConn) nextMatching(within time.Duration, part string) string {
	c.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case f := <-c.frames:
			if strings.Contains(f, part) {
				return f
			}
		case <-deadline:
			c.t.Fatalf("no frame with %s within %s", part, within)
			return ""
		}
	}
}

// drain returns the frames received and not read yet.
func (c *wireConn) drain() []string {
	var out []string
	for {
		select {
		case f := <-c.frames:
			out = append(out, f)
		default:
			return out
		}
	}
}

// waitClosed waits for the broker to close the connection.
func (c *wireConn) waitClosed(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(within):
		t.Fatalf("the broker kept the connection open for %s", within)
	}
}

// pollOpen starts a long-polling session and returns its sid.
func pollOpen(t *testing.T, brokerURL string) string {
	t.Helper()
	res, err := http.Get(brokerURL + "/socket.io/?EIO=4&transport=polling")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	info, err := protocol.DecodeOpen(body[min(1, len(body)):])
	if res.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("polling handshake: %d %q %v", res.StatusCode, body, err)
	}
	return info.SID
}

func pollPost(t *testing.T, brokerURL, sid, payload string) (int, string) {
	t.Helper()
	res, err := http.Post(brokerURL+"/socket.io/?EIO=4&transport=polling&sid="+sid, "text/plain", strings.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// pollClosed makes one long-polling GET and reports whether it found the
// session ended (a close packet, or the sid is unknown).
func pollClosed(brokerURL, sid string) bool {
	client := &http.Client{Timeout: 5 * time.Second}
	res, err := client.Get(brokerURL + "/socket.io/?EIO=4&transport=polling&sid=" + sid)
	if err != nil {
		return false
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode != http.StatusOK || strings.HasSuffix(string(body), "\x1e1") || string(body) == "1"
}

// bridgeCmd is the command line startBridge runs, with a token of the
// test's choosing.
func bridgeCmd(b *brokerProc, ws, tok, root string, extra ...string) *exec.Cmd {
	args := append([]string{"bridge", "--broker", b.url, "--workspace", ws, "--token", tok, "--root", root, "--log-level", "debug"}, extra...)
	return exec.Command(tetherBin, args...)
}

// logLines returns the process's stderr lines so far.
func (p *proc) logLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// countLines counts the process's stderr lines that contain every part.
func countLines(p *proc, parts ...string) int {
	n := 0
lines:
	for _, l := range p.logLines() {
		for _, part := range parts {
			if !strings.Contains(l, part) {
				continue lines
			}
		}
		n++
	}
	return n
}
