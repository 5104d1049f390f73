package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
	"github.com/tetherdev/tether/internal/testproc"
	"github.com/tetherdev/tether/internal/testwait"
	"github.com/tetherdev/tether/protocol"
)

// The processes of a run and how to start, crash and restart them. Every
// workspace is pinned to one broker (its owner, by index), so a call's path
// is known from its workspace and its entry broker alone.

// procMarkEnv marks every incarnation of a bridge (name.generation), so the
// run can tell whether a killed bridge left a process behind, even one
// that left its process group.
const procMarkEnv = "TETHER_CHAOS_PROC"

// startWait bounds how long a process may take to come up.
const startWait = 20 * time.Second

type topology struct {
	cfg    config
	bin    string
	dir    string // logs and bridge roots
	secret string
	prefix string // Redis channel prefix
	redis  redisServer

	brokers []*brokerNode
	spaces  []*workspace // bridges first, then clients

	control *http.Client // listing, readiness: not the callers' client
	caller  string       // caller token, any workspace

	clientsDir string // chaos_client.js and its node_modules
	events     clientEvents
}

// clientEvents is told what the socket.io clients report. Its methods are
// called from the clients' reading goroutines and must not block.
type clientEvents interface {
	onDelivered(cid string, ws int)
	onCancelled(cid string)
}

// redisServer is what the run needs of redistest.Server.
type redisServer interface {
	URL() string
	Addr() string
	Stop()
	Restart()
	Do(args ...string) (string, error)
}

// brokerNode is one broker: a fixed address, restarted on it after a kill.
type brokerNode struct {
	t    *topology
	idx  int
	name string // its --instance-id
	addr string
	url  string

	mu   sync.Mutex
	proc *testproc.Proc
	gen  int
}

// workspace is one workspace and what serves it: a tether bridge behind a
// proxy, or a socket.io client.
type workspace struct {
	t     *topology
	idx   int
	id    string
	owner int // broker index
	root  string
	token string

	// bridge
	proxy *proxy
	mu    sync.Mutex
	proc  *testproc.Proc
	gen   int

	// client
	client *nodeClient

	// conns records the workspace's disconnections and connections as the
	// run sees them (the proxy's closes, the client's own events).
	conns *connLog
}

func (w *workspace) bridge() bool { return w.client == nil }

func (t *topology) brokerArgs(b *brokerNode) []string {
	return []string{"broker", "--listen", b.addr, "--secret", t.secret, "--instance-id", b.name,
		"--redis", t.redis.URL(), "--redis-prefix", t.prefix, "--log-level", t.cfg.logLevel,
		"--ping-interval", t.cfg.pingInterval.String(), "--ping-timeout", t.cfg.pingTimeout.String(),
		"--drain", "2s"}
}

// start runs the broker's next incarnation on its address and waits until
// it answers /healthz. The port was free a moment ago; after a kill -9 it
// may take a moment to be free again, so a broker that exits at once is
// tried again.
func (b *brokerNode) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	deadline := time.Now().Add(startWait)
	for {
		b.gen++
		cmd := exec.Command(b.t.bin, b.t.brokerArgs(b)...)
		p, err := testproc.Start(fmt.Sprintf("broker %s.%d", b.name, b.gen), cmd, filepath.Join(b.t.dir, b.name+".log"))
		if err != nil {
			return err
		}
		testwait.Within(time.Until(deadline), func() bool { return p.Exited() || b.t.healthy(b.url) })
		if !p.Exited() && b.t.healthy(b.url) {
			b.proc = p
			return nil
		}
		p.Discard()
		if time.Now().After(deadline) {
			return fmt.Errorf("broker %s did not start on %s within %s\n%s", b.name, b.addr, startWait, p.LogTail(3000))
		}
		time.Sleep(100 * time.Millisecond) // a pause between attempts, each a new process: nothing tells when the port is free
	}
}

// kill crashes the broker (kill -9 of its process).
func (b *brokerNode) kill() {
	b.mu.Lock()
	p := b.proc
	b.proc = nil
	b.mu.Unlock()
	if p != nil {
		p.Kill()
		p.Discard()
	}
}

// stop ends the broker for good (SIGTERM, as an operator would).
func (b *brokerNode) stop() error {
	b.mu.Lock()
	p := b.proc
	b.proc = nil
	b.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop(15 * time.Second)
}

func (t *topology) healthy(url string) bool {
	res, err := t.control.Get(url + "/healthz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode == http.StatusOK
}

func (t *topology) ready(url string) bool {
	res, err := t.control.Get(url + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// held returns when each workspace that broker b holds itself connected
// (its own entries of its list: other instances answer a list too).
func (t *topology) held(b *brokerNode) (map[string]time.Time, error) {
	req, _ := http.NewRequest(http.MethodGet, b.url+"/api/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+t.caller)
	res, err := t.control.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("listing workspaces on %s: HTTP %d", b.name, res.StatusCode)
	}
	var list struct {
		Workspaces []protocol.Workspace `json:"workspaces"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("listing workspaces on %s: %w", b.name, err)
	}
	out := map[string]time.Time{}
	for _, w := range list.Workspaces {
		if w.Instance == b.name {
			out[w.WorkspaceID] = w.ConnectedAt
		}
	}
	return out, nil
}

// waitHeld waits until the owner of every workspace in spaces holds it
// with a connection made after since (zero: any), and its owner is ready.
func (t *topology) waitHeld(ctx context.Context, since time.Time, spaces ...*workspace) error {
	byOwner := map[int][]*workspace{}
	for _, w := range spaces {
		byOwner[w.owner] = append(byOwner[w.owner], w)
	}
	for owner, list := range byOwner {
		b := t.brokers[owner]
		for {
			held, err := t.held(b)
			ok := err == nil && t.ready(b.url)
			for _, w := range list {
				at, found := held[w.id]
				ok = ok && found && !at.Before(since.Truncate(time.Millisecond))
			}
			if ok {
				break
			}
			select {
			case <-ctx.Done():
				missing := []string{}
				for _, w := range list {
					if at, found := held[w.id]; !found || at.Before(since) {
						missing = append(missing, w.id)
					}
				}
				return fmt.Errorf("broker %s does not hold %s (connected after %s) or is not ready: %v", b.name, strings.Join(missing, ","), since.Format("15:04:05.000"), err)
			case <-time.After(50 * time.Millisecond):
				// Every 50 ms, not testwait's 5: a look is a list that every
				// broker answers over Redis, up to three faults recover at
				// once, and the run's own calls are what it measures.
			}
		}
	}
	return nil
}

// startBridge runs the bridge's next incarnation (it connects through its
// proxy and reconnects by itself).
func (w *workspace) startBridge() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	t := w.t
	cmd := exec.Command(t.bin, "bridge", "--broker", "http://"+w.proxy.addr(), "--workspace", w.id,
		"--token", w.token, "--root", w.root, "--log-level", t.cfg.logLevel)
	cmd.Env = append(os.Environ(), procMarkEnv+"="+w.mark())
	p, err := testproc.Start(fmt.Sprintf("bridge %s.%d", w.id, w.gen), cmd, filepath.Join(t.dir, w.id+".log"))
	if err != nil {
		return err
	}
	w.proc = p
	return nil
}

// mark is the procMarkEnv value of the bridge's current incarnation.
func (w *workspace) mark() string { return w.id + "." + strconv.Itoa(w.gen) + ";" }

// killBridge crashes the bridge (kill -9 of the bridge process alone) and
// returns what it left running after grace: its terminal reaper should
// have ended every command of its sessions by then.
func (w *workspace) killBridge(grace time.Duration) []string {
	w.mu.Lock()
	p, mark := w.proc, w.mark()
	w.proc = nil
	w.mu.Unlock()
	if p == nil {
		return nil
	}
	p.Kill()
	var left []proctree.Ref
	// Polling /proc: nothing signals that a non-child is gone.
	testwait.Within(grace, func() bool { left = proctree.WithEnv(procMarkEnv, mark); return len(left) == 0 })
	var out []string
	for _, q := range left {
		out = append(out, fmt.Sprintf("%d (%s)", q.Pid, q.Comm()))
	}
	proctree.KillAll(left)
	p.Discard()
	return out
}

func (w *workspace) stopBridge() error {
	w.mu.Lock()
	p := w.proc
	w.proc = nil
	w.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Stop(15 * time.Second)
}

// nodeClient is one chaos_client.js process.
type nodeClient struct {
	w     *workspace
	proc  *testproc.Proc
	stdin io.WriteCloser
	mu    sync.Mutex // serialises stdin writes
	read  sync.WaitGroup
}

// startClient starts a socket.io client for the workspace against broker
// b, named name; every fourth workspace's clients start on HTTP
// long-polling and upgrade.
func (w *workspace) startClient(b *brokerNode, name string) (*nodeClient, error) {
	t := w.t
	transports := "websocket"
	if w.idx%4 == 3 {
		transports = "default"
	}
	cmd := exec.Command("node", "chaos_client.js", "--url", b.url, "--token", w.token, "--workspace", w.id, "--transports", transports)
	cmd.Dir = t.clientsDir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p, err := testproc.Start(name, cmd, filepath.Join(t.dir, w.id+".log"))
	if err != nil {
		return nil, err
	}
	c := &nodeClient{w: w, proc: p, stdin: stdin}
	c.read.Go(func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var ev struct {
				E      string `json:"e"`
				ID     string `json:"id"`
				Reason string `json:"reason"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch ev.E {
			case "call":
				t.events.onDelivered(ev.ID, w.idx)
			case "cancel":
				t.events.onCancelled(ev.ID)
			case "connected":
				w.conns.add(time.Now(), true, name)
			case "disconnect":
				w.conns.add(time.Now(), false, name+": "+ev.Reason)
			}
		}
	})
	return c, nil
}

func (c *nodeClient) send(cmd any) error {
	b, _ := json.Marshal(cmd)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.stdin.Write(append(b, '\n'))
	return err
}

// stop closes the client's stdin (it leaves by itself) and waits.
func (c *nodeClient) stop() error {
	c.mu.Lock()
	_ = c.stdin.Close()
	c.mu.Unlock()
	var err error
	select {
	case <-c.proc.Done():
		if err = c.proc.Err(); err != nil {
			err = fmt.Errorf("%s exited badly: %w", c.proc.Name, err)
		}
		c.proc.Discard()
	case <-time.After(5 * time.Second):
		err = errors.Join(fmt.Errorf("%s did not leave within 5s of its stdin closing", c.proc.Name), c.proc.Stop(5*time.Second))
	}
	c.read.Wait()
	return err
}

// connLog is one workspace's connections and disconnections as the run
// observed them. Safe for concurrent use.
type connLog struct {
	mu     sync.Mutex
	events []connEvent
}

type connEvent struct {
	at     time.Time
	up     bool
	reason string
}

func (l *connLog) add(at time.Time, up bool, reason string) {
	l.mu.Lock()
	l.events = append(l.events, connEvent{at, up, reason})
	l.mu.Unlock()
}

func (l *connLog) snapshot() []connEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]connEvent(nil), l.events...)
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// stopAll stops every process and proxy of the topology, reporting what
// did not stop cleanly.
func (t *topology) stopAll() error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	add := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for _, w := range t.spaces {
		wg.Go(func() {
			if w.client != nil {
				add(w.client.stop())
				return
			}
			add(w.stopBridge())
			add(w.proxy.close())
		})
	}
	wg.Wait()
	for _, b := range t.brokers {
		wg.Go(func() { add(b.stop()) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
