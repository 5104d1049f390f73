package bus

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus/redistest"
)

// TestClusterPublishIsNotResentAfterALostReply: a publish runs on the
// cluster but its reply is lost with its connection. It is reported failed
// and not sent again, so its subscriber gets it once, as on a single server
// (the retry rule of publisher); go-redis alone would resend it.
func TestClusterPublishIsNotResentAfterALostReply(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	prefix := fmt.Sprintf("test:%s:%d:", t.Name(), time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := NewRedis(ctx, RedisConfig{
		ClusterAddrs: cluster.Addrs(), Prefix: prefix,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sub.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	got := make(chan string, 16)
	if _, err := sub.Subscribe(ctx, "ws", func(m []byte) { got <- string(m) }); err != nil {
		t.Fatal(err)
	}

	lose := &replyLoser{marker: []byte("lose-my-reply")}
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: cluster.Addrs(), MaxRetries: -1, // as NewRedis sets it
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &replyLosingConn{Conn: c, loser: lose}, nil
		},
	})
	defer client.Close()
	var wg sync.WaitGroup
	pub := &clusterPublisher{client: client, command: "spublish", prefix: prefix, wg: &wg}
	defer func() { pub.close(); wg.Wait() }()

	lose.armed.Store(true)
	if n, err := pub.publish(ctx, "ws", []byte("lose-my-reply")); err == nil {
		t.Fatalf("publish whose reply was lost = %d, nil; want an error", n)
	}
	if lose.armed.Load() {
		t.Fatal("the publish never reached the connection that loses its reply")
	}
	if n, err := pub.publish(ctx, "ws", []byte("after")); err != nil || n != 1 {
		t.Fatalf("publish after the lost reply = %d, %v; want 1", n, err)
	}
	var seen []string
	for m := ""; m != "after"; {
		select {
		case m = <-got:
			seen = append(seen, m)
		case <-ctx.Done():
			t.Fatalf("the publish after the lost reply did not arrive; seen %q", seen)
		}
	}
	if want := []string{"lose-my-reply", "after"}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("deliveries %q, want %q: the publish whose reply was lost ran once", seen, want)
	}
}

// replyLoser arms replyLosingConn for one command: the first connection to
// write marker while armed loses the reply.
type replyLoser struct {
	marker []byte
	armed  atomic.Bool
}

// replyLosingConn stands in for a network that loses a reply: after writing
// its loser's marker it reads Redis' reply (so the command has run), drops
// it, closes and reports io.EOF, as a connection broken at that moment
// would. Other connections and commands pass unchanged.
type replyLosingConn struct {
	net.Conn
	loser *replyLoser
	lost  atomic.Bool
}

func (c *replyLosingConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, c.loser.marker) && c.loser.armed.CompareAndSwap(true, false) {
		c.lost.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *replyLosingConn) Read(b []byte) (int, error) {
	if !c.lost.Load() {
		return c.Conn.Read(b)
	}
	var reply [64]byte
	_, _ = c.Conn.Read(reply[:])
	_ = c.Conn.Close()
	return 0, io.EOF
}
