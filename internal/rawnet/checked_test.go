//go:build unix

package rawnet_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tetherdev/tether/broker/bus/redistest"
	"github.com/tetherdev/tether/internal/rawnet"
	"github.com/tetherdev/tether/internal/testwait"
)

// checkedPair dials a listener with DialCheckedForTest and returns the
// checked client end and the server end.
func checkedPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = rawnet.DialCheckedForTest(&net.Dialer{Timeout: 2 * time.Second})(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = server.Close() })
	return client, server
}

// healthCheck is the check as go-redis makes it: RawConn.Read.
func healthCheck(t *testing.T, c net.Conn) error {
	t.Helper()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T is not a syscall.Conn", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc.Read(func(uintptr) bool {
		t.Fatal("the checked RawConn called the function given to Read")
		return true
	})
}

// awaitCheck runs healthCheck until it returns an error that is want, for
// up to 5 s (bytes and a close reach the socket a moment after the peer
// sends them).
func awaitCheck(t *testing.T, c net.Conn, want error) {
	t.Helper()
	var err error
	if !testwait.Within(5*time.Second, func() bool {
		err = healthCheck(t, c)
		return errors.Is(err, want)
	}) {
		t.Fatalf("health check: %v, want %v", err, want)
	}
}

func TestDialCheckedHealthCheckTellsIdleFromDataFromClosed(t *testing.T) {
	client, server := checkedPair(t)
	if err := healthCheck(t, client); err != nil {
		t.Fatalf("idle connection: health check %v, want nil", err)
	}
	if _, err := server.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	awaitCheck(t, client, rawnet.ErrUnexpectedData)
	// The peek took nothing: the byte is still there to read.
	buf := make([]byte, 4)
	if n, err := client.Read(buf); err != nil || string(buf[:n]) != "x" {
		t.Fatalf("read %q, %v after the check: want the byte it peeked", buf[:n], err)
	}
	if err := healthCheck(t, client); err != nil {
		t.Fatalf("after reading the byte: health check %v, want nil", err)
	}
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatalf("write: %v", err)
	}
	if n, err := io.ReadFull(server, buf); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("server read %q, %v", buf[:n], err)
	}
	_ = server.Close()
	awaitCheck(t, client, io.EOF)
}

// TestDialCheckedRedisClientReplacesAKilledConnection: a go-redis client on
// DialChecked, with no retries, finds its pooled connection killed by the
// server before the next command and dials anew, so the command succeeds
// (without the health check the command would fail on the dead socket).
func TestDialCheckedRedisClientReplacesAKilledConnection(t *testing.T) {
	srv := redistest.Start(t)
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opts.MaxRetries = -1
	opts.PoolSize = 1
	opts.Dialer = rawnet.DialCheckedForTest(&net.Dialer{Timeout: 2 * time.Second})
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	id, err := client.ClientID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("CLIENT", "KILL", "ID", strconv.FormatInt(id, 10)); err != nil {
		t.Fatal(err)
	}
	// Redis closes the socket before CLIENT KILL answers, and on loopback
	// the FIN is in the client's socket by then.
	if got, err := client.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after the kill: %q, %v: want v (the health check should have replaced the connection)", got, err)
	}
	if nid, err := client.ClientID(ctx).Result(); err != nil || nid == id {
		t.Fatalf("client id after the kill %d, %v: want a new connection, not %d", nid, err, id)
	}
}
