package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherdev/tether/broker/auth"
)

// targetIdleKB is the bound on broker memory per idle connection.
const targetIdleKB = 30

// BenchmarkIdleConnections measures what an idle workspace connection costs
// the broker: a fresh broker's RSS, then BENCH_IDLE_CONNS (5000) WebSocket
// clients that complete the Engine.IO and Socket.IO handshakes for a
// workspace each and then only answer pings, then the RSS once it stops
// growing. The broker pings every hour so that the measurement is of idle
// connections, not of heartbeats.
func BenchmarkIdleConnections(b *testing.B) {
	bin := tetherBin(b)
	n := 5000
	if v := os.Getenv("BENCH_IDLE_CONNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("BENCH_IDLE_CONNS=%q: want a positive integer", v)
		}
	}
	needFiles(b, n+1000)
	brk, secret := startBroker(b, bin, "--ping-interval", "1h")
	// The baseline is taken once the fresh broker's start-up has settled;
	// nothing signals that, so time passes.
	time.Sleep(200 * time.Millisecond)
	rss0, _, err := brk.memKB()
	if err != nil {
		b.Fatal(err)
	}
	control := controlClient(b)
	stats0, err := runtimeStats(control, brk.url)
	if err != nil {
		b.Fatal(err)
	}

	start := time.Now()
	clients := dialIdleClients(b, brk.url, secret, n)
	dialTime := time.Since(start)

	rss, settle := settledRSS(b, brk)
	stats, err := runtimeStats(control, brk.url)
	if err != nil {
		b.Fatal(err)
	}
	list, err := listWorkspaces(control, brk.url, mintToken(b, secret, auth.RoleCaller, auth.AnyWorkspace))
	if err != nil {
		b.Fatal(err)
	}
	if len(list) != n {
		b.Errorf("broker lists %d workspaces, want %d", len(list), n)
	}
	clients.close()

	perConnKB := float64(rss-rss0) / float64(n)
	heapKB := (stats.heapInuse - stats0.heapInuse) / 1024 / float64(n)
	goroutines := (stats.goroutines - stats0.goroutines) / float64(n)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(perConnKB, "KB/conn")
	b.ReportMetric(heapKB, "heap-KB/conn")
	b.ReportMetric(goroutines, "goroutines/conn")
	b.ReportMetric(float64(rss)/1024, "rss-MB")

	fmt.Printf("\nidle connections: %d Socket.IO clients, one workspace each, broker --ping-interval 1h\n", n)
	fmt.Printf("  broker RSS before %.1f MB, after %.1f MB (settled %v after the last handshake; %d handshakes took %v)\n",
		float64(rss0)/1024, float64(rss)/1024, settle.Round(time.Millisecond), n, dialTime.Round(time.Millisecond))
	fmt.Printf("  per connection: %.1f KB RSS, %.1f KB Go heap in use, %.2f goroutines\n", perConnKB, heapKB, goroutines)
	fmt.Printf("target: < %d KB per idle connection: %s\n\n", targetIdleKB, verdict(perConnKB < targetIdleKB))
}

// needFiles makes sure this process may open n descriptors, or skips.
func needFiles(b *testing.B, n int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatalf("reading RLIMIT_NOFILE: %v", err)
	}
	if lim.Cur >= uint64(n) {
		return
	}
	if lim.Max >= uint64(n) {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
			return
		}
	}
	b.Skipf("RLIMIT_NOFILE is %d (hard %d); %d descriptors needed: raise ulimit -n or lower BENCH_IDLE_CONNS", lim.Cur, lim.Max, n)
}

// settleMin is how long settledRSS waits at least: a server that has just
// taken thousands of connections may give memory back once it is quiet
// (V8's memory reducer does for node, tether's pacer after 2 s quiet), and
// what it holds then is what its idle connections cost.
const settleMin = 4 * time.Second

// settledRSS waits until the server's RSS has settled (changed by less than
// 1% over a second, after settleMin, at most 15s) and returns it with the
// time that took.
func settledRSS(b *testing.B, brk *server) (int64, time.Duration) {
	start := time.Now()
	var history []int64
	for {
		rss, _, err := brk.memKB()
		if err != nil {
			b.Fatal(err)
		}
		history = append(history, rss)
		if len(history) > 4 && time.Since(start) >= settleMin {
			old := history[len(history)-5]
			if math.Abs(float64(rss-old)) < 0.01*float64(old) || time.Since(start) > 15*time.Second {
				return rss, time.Since(start)
			}
		}
		time.Sleep(250 * time.Millisecond) // the samples' pace is the measure: settled means little change over the last four
	}
}

// brokerRuntime is what the broker's /metrics says of its Go runtime.
type brokerRuntime struct {
	goroutines, heapInuse float64
}

func runtimeStats(client *http.Client, brokerURL string) (brokerRuntime, error) {
	res, err := client.Get(brokerURL + "/metrics")
	if err != nil {
		return brokerRuntime{}, fmt.Errorf("reading broker metrics: %w", err)
	}
	defer res.Body.Close()
	var s brokerRuntime
	found := 0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "go_goroutines":
			dst = &s.goroutines
		case "go_memstats_heap_inuse_bytes":
			dst = &s.heapInuse
		default:
			continue
		}
		if *dst, err = strconv.ParseFloat(value, 64); err != nil {
			return s, fmt.Errorf("parsing metric %s %q: %w", name, value, err)
		}
		found++
	}
	if found != 2 {
		return s, fmt.Errorf("broker metrics lack go_goroutines or go_memstats_heap_inuse_bytes")
	}
	return s, sc.Err()
}

// idleClients are open Socket.IO connections, each with a goroutine that
// answers the broker's pings.
type idleClients struct {
	conns  []*websocket.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	tr     *http.Transport
}

// dialIdleClients connects n clients for workspaces ws-0 … ws-(n-1), each
// with its own bridge token.
func dialIdleClients(b *testing.B, brokerURL string, secret []byte, n int) *idleClients {
	tokens := make([]string, n)
	for i := range n {
		tokens[i] = mintToken(b, secret, auth.RoleBridge, fmt.Sprintf("ws-%d", i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &idleClients{
		conns:  make([]*websocket.Conn, n),
		cancel: cancel,
		tr:     &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext},
	}
	b.Cleanup(c.close) // also on failure below
	url := "ws" + strings.TrimPrefix(brokerURL, "http") + "/socket.io/?EIO=4&transport=websocket"
	client := &http.Client{Transport: c.tr}

	next := make(chan int)
	errc := make(chan error, 1)
	var dialers sync.WaitGroup
	for range 16 {
		dialers.Go(func() {
			for i := range next {
				ws, err := handshake(ctx, client, url, fmt.Sprintf("ws-%d", i), tokens[i])
				if err != nil {
					select {
					case errc <- fmt.Errorf("client %d: %w", i, err):
					default:
					}
					continue
				}
				c.conns[i] = ws
				c.wg.Go(func() { answerPings(ctx, ws) })
			}
		})
	}
	for i := range n {
		next <- i
		if len(errc) > 0 {
			break
		}
	}
	close(next)
	dialers.Wait()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	return c
}

// handshake opens a WebSocket and completes the Engine.IO open and the
// Socket.IO CONNECT for workspace ws.
func handshake(ctx context.Context, client *http.Client, url, ws, token string) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: client, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, fmt.Errorf("dialing: %w", err)
	}
	fail := func(err error) (*websocket.Conn, error) {
		_ = conn.CloseNow()
		return nil, err
	}
	// The context of a Read also governs the connection: a handshake read
	// must not end it after the handshake, so it gets one that is not
	// cancelled on return.
	readCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer stop()
	_, open, err := conn.Read(readCtx)
	if err != nil {
		return fail(fmt.Errorf("reading open packet: %w", err))
	}
	if !strings.HasPrefix(string(open), "0{") {
		return fail(fmt.Errorf("open packet %q", open))
	}
	auth, _ := json.Marshal(map[string]string{"token": token, "workspace_id": ws})
	if err := conn.Write(ctx, websocket.MessageText, append([]byte("40"), auth...)); err != nil {
		return fail(fmt.Errorf("sending CONNECT: %w", err))
	}
	_, ack, err := conn.Read(readCtx)
	if err != nil {
		return fail(fmt.Errorf("reading CONNECT answer: %w", err))
	}
	if !strings.HasPrefix(string(ack), `40{"sid":`) {
		return fail(fmt.Errorf("CONNECT answered %q", ack))
	}
	return conn, nil
}

// answerPings reads until the connection ends, answering Engine.IO pings.
func answerPings(ctx context.Context, ws *websocket.Conn) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if string(data) == "2" {
			if err := ws.Write(ctx, websocket.MessageText, []byte("3")); err != nil && !errors.Is(err, context.Canceled) {
				return
			}
		}
	}
}

// close ends every connection and waits for their goroutines. It is
// idempotent.
func (c *idleClients) close() {
	c.cancel()
	for _, ws := range c.conns {
		if ws != nil {
			_ = ws.CloseNow()
		}
	}
	c.wg.Wait()
	c.tr.CloseIdleConnections()
}
