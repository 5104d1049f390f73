//go:build unix

package eio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests drive a sock over a real loopback TCP connection.

// sockPair returns a sock over one end of a loopback connection and the
// other end as a plain net.Conn.
func sockPair(t *testing.T, writeTimeout time.Duration) (*sock, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	raw, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	s := newSock(nc, raw, writeTimeout, nil)
	t.Cleanup(func() { _ = s.Close(); _ = peer.Close() })
	return s, peer
}

func TestSockHoldsNoReadBufferOnceDrained(t *testing.T) {
	s, peer := sockPair(t, time.Second)
	if _, err := peer.Write([]byte("hello world")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 0, 11)
	for len(got) < 11 {
		p := make([]byte, 4)
		n, err := s.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p[:n]...)
	}
	if string(got) != "hello world" {
		t.Fatalf("read %q", got)
	}
	if s.rbuf != nil {
		t.Fatalf("sock keeps a %d byte read buffer with nothing in it", cap(*s.rbuf))
	}
	_ = peer.Close()
	if n, err := s.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d, %v; want 0, EOF", n, err)
	}
}

// TestSockReadOutlivesTheQuietDeadlineInAMessage: the deadline quiet sets
// at a message boundary is for a client that sends nothing; one whose
// message takes longer than that to arrive is read to its end, with a
// small buffer or a large one.
func TestSockReadOutlivesTheQuietDeadlineInAMessage(t *testing.T) {
	for _, size := range []int{16, sockReadBufSize * 2} {
		s, peer := sockPair(t, time.Second)
		s.rmu.Lock()
		s.rdeadline = time.Now().Add(50 * time.Millisecond)
		_ = s.SetReadDeadline(s.rdeadline)
		s.rmu.Unlock()
		go func() {
			time.Sleep(200 * time.Millisecond) // the subject: bytes that come after the quiet deadline
			_, _ = peer.Write(make([]byte, size))
		}()
		if n, err := s.Read(make([]byte, size)); err != nil || n == 0 {
			t.Fatalf("read of %d bytes coming after the quiet deadline: %d, %v", size, n, err)
		}
	}
}

func TestSockCorkedWritesWaitForUncork(t *testing.T) {
	s, peer := sockPair(t, time.Second)
	s.cork()
	for _, part := range []string{"one ", "two ", "three"} {
		if _, err := s.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing reaches the peer while corked.
	_ = peer.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := peer.Read(make([]byte, 16)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("peer read %d bytes (%v) before uncork", n, err)
	}
	if err := s.uncork(); err != nil {
		t.Fatal(err)
	}
	if s.wbuf != nil {
		t.Fatal("sock keeps its write buffer after uncork")
	}
	_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 13)
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "one two three" {
		t.Fatalf("peer read %q, %v", got, err)
	}
	// Not corked, a write goes straight out.
	if _, err := s.Write([]byte("four")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(peer, got[:4]); err != nil || string(got[:4]) != "four" {
		t.Fatalf("peer read %q, %v", got[:4], err)
	}
}

func TestSockWriteToAPeerThatDoesNotReadGivesUp(t *testing.T) {
	s, _ := sockPair(t, 200*time.Millisecond)
	big := bytes.Repeat([]byte("x"), 32<<20) // more than both socket buffers
	start := time.Now()
	s.cork()
	if _, err := s.Write(big); err != nil {
		t.Fatal(err)
	}
	err := s.uncork()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("uncork to a peer that does not read: %v, want a deadline error", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("gave up after %v, want about the write timeout", el)
	}
	if _, err := s.Write([]byte("more")); err == nil {
		t.Fatal("a write after a failed one succeeded: the stream is broken")
	}
}

// A client may send its first frame together with the upgrade request; the
// bytes net/http read past the request (or those it did not) must reach
// coder/websocket, in order.
func TestSocketHijackerKeepsBytesReadPastTheRequest(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj := &socketHijacker{ResponseWriter: w, writeTimeout: time.Second}
		nc, brw, err := hj.Hijack()
		if err != nil {
			got <- "hijack: " + err.Error()
			return
		}
		defer nc.Close()
		if hj.sock == nil {
			got <- "no sock over a TCP connection"
			return
		}
		line, err := brw.ReadString('\n')
		if err != nil {
			got <- "read: " + err.Error()
			return
		}
		got <- line
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\nafter the request\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-got:
		if line != "after the request\n" {
			t.Fatalf("server read %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the handler")
	}
}
