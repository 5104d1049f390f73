package caller_test

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/tlsclient"
)

// connCounter is an HTTP test server that counts the connections it
// accepted and tells when a request's context ended.
type connCounter struct {
	srv  *httptest.Server
	mu   sync.Mutex
	conn int
	gone chan struct{} // a request's context ended (the client went)
}

func newConnCounter(t *testing.T, h func(w http.ResponseWriter, r *http.Request, gone chan<- struct{})) *connCounter {
	t.Helper()
	cc := &connCounter{gone: make(chan struct{}, 16)}
	cc.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(w, r, cc.gone) }))
	cc.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cc.mu.Lock()
			cc.conn++
			cc.mu.Unlock()
		}
	}
	cc.srv.Start()
	t.Cleanup(cc.srv.Close)
	return cc
}

func (cc *connCounter) conns() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.conn
}

func echoHandler(w http.ResponseWriter, r *http.Request, _ chan<- struct{}) {
	body, _ := io.ReadAll(r.Body)
	if r.URL.Query().Has("close") {
		w.Header().Set("Connection", "close")
	}
	if r.URL.Query().Has("big") { // chunked: more than the server buffers
		body = []byte(strings.Repeat("x", 64<<10))
	}
	_, _ = w.Write(body)
}

func leanClient(t *testing.T, tr *caller.Transport) *http.Client {
	t.Helper()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func post(t *testing.T, c *http.Client, url, body string) string {
	t.Helper()
	res, err := c.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestTransportKeepsOneConnectionForSequentialCalls: calls one after the
// other share one connection; an answer with Connection: close, or one
// whose body was not read to its end, is not used again; chunked answers
// are read whole.
func TestTransportKeepsOneConnectionForSequentialCalls(t *testing.T) {
	cc := newConnCounter(t, echoHandler)
	c := leanClient(t, &caller.Transport{})
	for i := range 5 {
		if got := post(t, c, cc.srv.URL+"/calls", "call"); got != "call" {
			t.Fatalf("call %d answered %q", i, got)
		}
	}
	if n := cc.conns(); n != 1 {
		t.Fatalf("5 sequential calls opened %d connections, want 1", n)
	}
	if got := post(t, c, cc.srv.URL+"/calls?big", ""); len(got) != 64<<10 {
		t.Fatalf("chunked answer: %d bytes", len(got))
	}
	_ = post(t, c, cc.srv.URL+"/calls?close", "bye")
	_ = post(t, c, cc.srv.URL+"/calls", "after close")
	if n := cc.conns(); n != 2 {
		t.Fatalf("after an answer with Connection: close: %d connections, want 2", n)
	}
	res, err := c.Post(cc.srv.URL+"/calls?big", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close() // unread
	_ = post(t, c, cc.srv.URL+"/calls", "after unread")
	if n := cc.conns(); n != 3 {
		t.Fatalf("after an answer closed unread: %d connections, want 3", n)
	}
}

// TestTransportContextEndsTheRequestAtOnce: a call whose context ends while
// the server holds it returns the context's error at once, and the server
// sees its client go (the broker cancels the call, tool_cancel).
func TestTransportContextEndsTheRequestAtOnce(t *testing.T) {
	cc := newConnCounter(t, func(w http.ResponseWriter, r *http.Request, gone chan<- struct{}) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
		gone <- struct{}{}
	})
	c := leanClient(t, &caller.Transport{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cc.srv.URL+"/calls", strings.NewReader("held"))
	start := time.Now()
	res, err := c.Do(req)
	if err == nil {
		_ = res.Body.Close()
		t.Fatal("a held call whose context ended got an answer")
	}
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("got %v after %s, want the context's deadline after 200ms", err, time.Since(start))
	}
	select {
	case <-cc.gone:
	case <-time.After(2 * time.Second):
		t.Fatal("the server never saw its client go")
	}
}

// TestTransportDoesNotReuseAStaleConnection: a connection idle for longer
// than IdleTimeout is closed, not used.
func TestTransportDoesNotReuseAStaleConnection(t *testing.T) {
	cc := newConnCounter(t, echoHandler)
	c := leanClient(t, &caller.Transport{IdleTimeout: 50 * time.Millisecond})
	_ = post(t, c, cc.srv.URL+"/calls", "first")
	// Time passing is what is tested: the connection sits idle past
	// IdleTimeout (a real socket: no fake clock reaches it).
	time.Sleep(100 * time.Millisecond)
	_ = post(t, c, cc.srv.URL+"/calls", "second")
	if n := cc.conns(); n != 2 {
		t.Fatalf("a call after the idle timeout used %d connections in all, want 2", n)
	}
}

// recorder is a RoundTripper that records what reached it.
type recorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return nil, errors.New("recorded")
}

// TestTransportLeavesProxiesToTheFallback: URLs the proxy settings send
// through a proxy, https ones too, go to Fallback. (The package's TestMain
// checks for leaked goroutines.)
func TestTransportLeavesProxiesToTheFallback(t *testing.T) {
	rec := &recorder{}
	proxied := func(req *http.Request) (*url.URL, error) {
		if req.URL.Hostname() == "broker.example" {
			return url.Parse("http://127.0.0.1:1")
		}
		return nil, nil
	}
	c := leanClient(t, &caller.Transport{Fallback: rec, Proxy: proxied})
	_, _ = c.Get("https://broker.example/x")
	_, _ = c.Get("http://broker.example:8377/y")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.urls) != 2 || rec.urls[0] != "https://broker.example/x" || rec.urls[1] != "http://broker.example:8377/y" {
		t.Fatalf("the fallback got %v", rec.urls)
	}
}

// TestTransportServesHTTPSThroughItsTLSDialerOnOneConnection: https calls
// are made over connections the TLS dialer verified, kept for the next
// call as plain ones are; a server whose certificate the dialer does not
// trust is refused with the error that says so.
func TestTransportServesHTTPSThroughItsTLSDialerOnOneConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := tlsclient.New(tlsclient.Options{CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	c := leanClient(t, &caller.Transport{TLS: d, Fallback: &recorder{}})
	for _, body := range []string{"one", "two"} {
		if got := post(t, c, srv.URL+"/calls", body); got != body {
			t.Fatalf("got %q, want %q", got, body)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("two https calls used %d connections, want 1", n)
	}

	sys, err := tlsclient.New(tlsclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	untrusting := leanClient(t, &caller.Transport{TLS: sys, Fallback: &recorder{}})
	_, err = untrusting.Get(srv.URL + "/x")
	if !errors.Is(err, tlsclient.ErrUntrusted) || !strings.Contains(err.Error(), "pass --ca FILE") {
		t.Fatalf("an untrusted certificate: %v", err)
	}
}
