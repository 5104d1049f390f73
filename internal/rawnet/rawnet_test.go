//go:build unix

package rawnet_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/rawnet"
	"github.com/tetherdev/tether/internal/testwait"
)

// acceptPair returns a connection accepted through rawnet.Listener and the
// client end of it.
func acceptPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wl := rawnet.ListenerForTest(ln)
	t.Cleanup(func() { _ = wl.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := wl.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
	}
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = server.Close() })
	return server, client
}

func TestListenerConnReadsWritesAndEndsAsATCPConn(t *testing.T) {
	server, client := acceptPair(t)
	if fmt.Sprintf("%T", server) == "*net.TCPConn" {
		t.Fatalf("accepted %T: not wrapped", server)
	}
	if _, ok := server.(syscall.Conn); !ok {
		t.Fatalf("accepted %T has no SyscallConn: a WebSocket could not be hijacked into a sock", server)
	}

	// Read what the client sent, waiting for it. The delay is the subject:
	// the bytes come while Read waits, and nothing tells that it waits.
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = client.Write([]byte("hello"))
	}()
	buf := make([]byte, 16)
	n, err := server.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}

	// A write larger than the socket takes at once waits for the reader
	// and arrives whole.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MB
	got := make(chan []byte, 1)
	go func() {
		var all bytes.Buffer
		chunk := make([]byte, 64<<10)
		for all.Len() < len(big) {
			n, err := client.Read(chunk)
			if err != nil {
				break
			}
			all.Write(chunk[:n])
		}
		got <- all.Bytes()
	}()
	if n, err := server.Write(big); err != nil || n != len(big) {
		t.Fatalf("Write of 16 MB = %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the client read %d bytes, not the 16 MB written", len(b))
	}

	// A read deadline ends a read that waits, as a timeout.
	if err := server.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = server.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) > 2*time.Second {
		t.Fatalf("Read past its deadline = %v after %s, want a timeout at the deadline", err, time.Since(start))
	}
	_ = server.SetReadDeadline(time.Time{})

	// The client closing is io.EOF; writing to a closed peer fails.
	_ = client.Close()
	if _, err := server.Read(buf); err != io.EOF {
		t.Fatalf("Read after the client closed = %v, want io.EOF", err)
	}
	testwait.Until(t, 5*time.Second, func() bool {
		_, err := server.Write([]byte("x"))
		return err != nil
	}, "a write to the closed peer to fail")
}

func TestListenerServesHTTPKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(append([]byte("echo:"), body...))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(rawnet.ListenerForTest(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	reused := 0
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if info.Reused {
			reused++
		}
	}}
	for i := range 50 {
		body := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*1000)
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, "http://"+ln.Addr().String()+"/", bytes.NewReader(body))
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		got, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if !bytes.Equal(got, append([]byte("echo:"), body...)) {
			t.Fatalf("request %d answered %d bytes, want the %d sent back", i, len(got), len(body)+5)
		}
	}
	if reused != 49 {
		t.Fatalf("%d of 50 requests reused the connection, want 49: keep-alive over the wrapped connection", reused)
	}
}

// TestTryWriteWritesWhatFitsWithoutWaiting: all of a small write; of one
// larger than the socket buffers while the peer reads nothing, a part,
// at once and without an error; the rest reaches the peer with a plain
// Write once it reads. A connection that is not the package's is left
// to the caller.
func TestTryWriteWritesWhatFitsWithoutWaiting(t *testing.T) {
	server, client := acceptPair(t)
	if n, ok, err := rawnet.TryWrite(server, []byte("hello")); !ok || n != 5 || err != nil {
		t.Fatalf("small TryWrite: %d, %v, %v", n, ok, err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "hello" {
		t.Fatalf("peer read %q, %v", got, err)
	}
	big := bytes.Repeat([]byte("x"), 64<<20)
	start := time.Now()
	n, ok, err := rawnet.TryWrite(server, big)
	if !ok || err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("large TryWrite: %d of %d, %v, %v", n, len(big), ok, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("TryWrite waited %s", took)
	}
	done := make(chan error, 1)
	go func() { _, err := server.Write(big[n:]); done <- err }()
	if m, err := io.Copy(io.Discard, io.LimitReader(client, int64(len(big)))); err != nil || m != int64(len(big)) {
		t.Fatalf("peer read %d of %d: %v", m, len(big), err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	plain, _ := net.Pipe()
	defer plain.Close()
	if n, ok, err := rawnet.TryWrite(plain, []byte("x")); ok || n != 0 || err != nil {
		t.Fatalf("TryWrite on a net.Pipe: %d, %v, %v; want it left to the caller", n, ok, err)
	}
}
