package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoConn is one connection of the echo client: which server, which
// workspace, and the token (tether checks it; the peers ignore it).
type echoConn struct {
	URL       string `json:"url"`
	Workspace string `json:"workspace"`
	Token     string `json:"token,omitempty"`
}

// echoClients is a running e2e/clients/echo_clients.js: the real
// socket.io-client holding many workspace connections, answering every
// tool_call through its ack at once. Its methods must be called from the
// benchmark's goroutine.
type echoClients struct {
	*proc
	stdin  io.WriteCloser
	events chan echoEvent // ready, failed and stats lines; others are only kept for the tail
	read   sync.WaitGroup // the stdout reader

	mu   sync.Mutex
	tail []string // the last lines of its stdout, for failure messages
}

type echoEvent struct {
	Event     string `json:"event"`
	Connected int    `json:"connected"`
	Answered  int    `json:"answered"`
	Workspace string `json:"workspace"`
	Message   string `json:"message"`
}

// startEchoClients starts the echo client with conns and waits until all
// of them are connected (bounded by 30s plus 10ms a connection).
func startEchoClients(b *testing.B, e *peersEnvironment, name string, conns []echoConn) *echoClients {
	b.Helper()
	config := map[string]any{"conns": conns, "parallel": 200}
	if strings.HasPrefix(conns[0].URL, "https://") {
		config["ca"], _, _ = benchTLSFiles(b)
	}
	raw, err := json.Marshal(config)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(childDir(b, "echo-clients"), "echo-clients.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(e.node, filepath.Join(e.clientsDir, "echo_clients.js"), "--config", path)
	cmd.Env = os.Environ()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout = w
	c := &echoClients{stdin: stdin, events: make(chan echoEvent, 16)}
	c.proc = startCmd(b, "echo-clients-"+name, cmd)
	_ = w.Close() // the child holds its own end
	c.read.Go(func() { c.readEvents(r) })
	b.Cleanup(func() { c.stop(b) }) // runs before startCmd's cleanup: also waits for the reader

	wait := 30*time.Second + time.Duration(len(conns))*10*time.Millisecond
	ev := c.next(b, wait)
	switch {
	case ev.Event == "ready" && ev.Connected == len(conns):
		return c
	case ev.Event == "failed":
		b.Fatalf("%s: connection for workspace %s failed: %s\n%s", c.name, ev.Workspace, ev.Message, c.logTail())
	default:
		b.Fatalf("%s: want every connection ready, got %+v\n%s", c.name, ev, c.logTail())
	}
	return nil
}

// readEvents reads the client's stdout until it closes.
func (c *echoClients) readEvents(r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		c.tail = append(c.tail, line)
		if len(c.tail) > 20 {
			c.tail = c.tail[1:]
		}
		c.mu.Unlock()
		var ev echoEvent
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch ev.Event {
		case "ready", "failed", "stats":
			select {
			case c.events <- ev:
			default: // nobody asked; never block the reader
			}
		}
	}
}

// next waits for the next event, failing b after wait or when the client
// exits.
func (c *echoClients) next(b *testing.B, wait time.Duration) echoEvent {
	b.Helper()
	select {
	case ev := <-c.events:
		return ev
	case <-c.Done():
		// Its last lines may still be on their way to the channel.
		c.read.Wait()
		select {
		case ev := <-c.events:
			return ev
		default:
		}
		b.Fatalf("%s exited: %v\n%s", c.name, c.Err(), c.logTail())
	case <-time.After(wait):
		b.Fatalf("%s: no event within %v\n%s", c.name, wait, c.logTail())
	}
	return echoEvent{}
}

// stats asks the client how many calls it answered and how many
// connections it holds.
func (c *echoClients) stats(b *testing.B) (answered, connected int) {
	b.Helper()
	if _, err := io.WriteString(c.stdin, "stats\n"); err != nil {
		b.Fatalf("%s: asking for stats: %v", c.name, err)
	}
	ev := c.next(b, 10*time.Second)
	if ev.Event != "stats" {
		b.Fatalf("%s: want stats, got %+v", c.name, ev)
	}
	return ev.Answered, ev.Connected
}

// stop ends the client and waits for its stdout reader. It is idempotent.
func (c *echoClients) stop(b *testing.B) {
	c.proc.stop(b)
	c.read.Wait()
}

// logTail is the end of the client's stdout and stderr.
func (c *echoClients) logTail() string {
	c.mu.Lock()
	out := strings.Join(c.tail, "\n")
	c.mu.Unlock()
	return fmt.Sprintf("--- %s stdout (tail) ---\n%s\n%s", c.name, out, c.proc.logTail())
}
