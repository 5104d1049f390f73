//go:build !windows

package dap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// adapterProc is a running adapter process in its own process group, with
// the tail of its stderr kept for error reports.
type adapterProc struct {
	cmd    *exec.Cmd
	conn   io.ReadWriteCloser // stdio pipes or the TCP connection
	addr   string             // the TCP address of a listening or dialled adapter
	client *Client
	stderr *tailBuffer
	exited chan struct{} // closed once cmd.Wait returned

	// known are the adapter's descendants seen so far (pid -> start time),
	// so that they can be ended even after the adapter died and its
	// children were reparented (an adapter crash).
	mu    sync.Mutex
	known map[int]uint64
}

// remember records the adapter's current descendants.
func (p *adapterProc) remember() {
	if p.cmd == nil {
		return // dialled: not ours
	}
	tree := proctree.Descendants(p.cmd.Process.Pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known == nil {
		p.known = make(map[int]uint64)
	}
	for _, q := range tree {
		p.known[q.Pid] = q.Start
	}
}

// tree is the adapter's descendants now plus those remembered.
func (p *adapterProc) tree() []proctree.Ref {
	if p.cmd == nil {
		return nil // dialled: not ours
	}
	tree := proctree.Descendants(p.cmd.Process.Pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	for pid, start := range p.known {
		tree = append(tree, proctree.Ref{Pid: pid, Start: start})
	}
	return tree
}

// Command is how to start one adapter process.
type Command struct {
	Path string
	Args []string
	// Listen means the adapter serves DAP on a TCP port it prints on stdout
	// or stderr ("listening at: 127.0.0.1:PORT") instead of on stdio.
	Listen bool
	// Dial, when set, is the address of an adapter that is already serving
	// DAP on TCP (debugpy.listen() starts one in the debuggee): it is
	// connected to and no process is started; Path and Args are unused.
	Dial string
	// Serve, when set, is an adapter that runs in this process: it is
	// handed one end of an in-memory pipe, serves DAP on it until the pipe
	// closes, and returns only once everything it started has ended. dir
	// and environ are what a started adapter would get. Path names what it
	// runs (for debug_adapters); Args are unused.
	Serve func(conn io.ReadWriteCloser, dir string, environ []string)
	// Env is added to the adapter process's environment (KEY=VALUE).
	Env []string
}

var listenLine = regexp.MustCompile(`listening at:?\s*\[?([0-9a-fA-F.:]+?)\]?:(\d+)`)

// startAdapter starts spec with its own process group, killed with the
// bridge (proctree.Start), and connects a Client to it.
func startAdapter(ctx context.Context, spec Command, dir string, env []string, h handlers) (*adapterProc, error) {
	if spec.Dial != "" {
		return dialAdapter(ctx, spec.Dial, h)
	}
	if spec.Serve != nil {
		return serveAdapter(spec, dir, env, h), nil
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = dir
	cmd.Env = append(env[:len(env):len(env)], spec.Env...)
	p := &adapterProc{cmd: cmd, stderr: newTailBuffer(8 << 10), exited: make(chan struct{})}

	var stdin io.WriteCloser
	var stdout io.ReadCloser
	var err error
	if stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := proctree.Start(cmd); err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.Path, err)
	}
	addrCh := make(chan string, 1)
	// Wait closes the pipes: every reader must be done first, or the last
	// messages (exited, terminated) could be lost.
	var readers sync.WaitGroup
	readers.Go(func() {
		if spec.Listen {
			scanListen(stderr, p.stderr, addrCh)
			return
		}
		_, _ = io.Copy(p.stderr, stderr)
	})
	if spec.Listen {
		// delve prints its address on stdout.
		readers.Go(func() { scanListen(stdout, p.stderr, addrCh) })
		_ = stdin.Close()
	} else {
		p.conn = &stdioConn{r: stdout, w: stdin}
		p.client = newClient(stdout, stdin, h)
		readers.Go(func() { <-p.client.Done() })
	}
	go func() {
		readers.Wait()
		_ = cmd.Wait()
		proctree.Reaped(cmd.Process.Pid)
		close(p.exited)
	}()
	if !spec.Listen {
		return p, nil
	}

	var addr string
	select {
	case addr = <-addrCh:
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before listening: %s", spec.Path, p.stderr.String())
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("waiting for %s to listen: %w", spec.Path, ctx.Err())
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("connecting to %s at %s: %w", spec.Path, addr, err)
	}
	p.conn, p.addr = conn, addr
	p.client = newClient(conn, conn, h)
	return p, nil
}

// dialAdapter connects to an adapter that some other process runs; the
// adapterProc has no process, and "exits" when the connection closes.
func dialAdapter(ctx context.Context, addr string, h handlers) (*adapterProc, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the debug adapter at %s: %w", addr, err)
	}
	p := &adapterProc{conn: conn, addr: addr, stderr: newTailBuffer(8 << 10), exited: make(chan struct{})}
	p.client = newClient(conn, conn, h)
	go func() {
		<-p.client.Done()
		close(p.exited)
	}()
	return p, nil
}

// serveAdapter runs an in-process adapter over a pipe; the adapterProc has
// no process, and "exits" when Serve returns.
func serveAdapter(spec Command, dir string, env []string, h handlers) *adapterProc {
	ours, theirs := net.Pipe()
	p := &adapterProc{conn: ours, stderr: newTailBuffer(8 << 10), exited: make(chan struct{})}
	p.client = newClient(ours, ours, h)
	go func() {
		defer close(p.exited)
		spec.Serve(theirs, dir, env)
	}()
	return p
}

// scanListen copies r into tail, line by line, and reports the first
// "listening at" address on addr.
func scanListen(r io.Reader, tail *tailBuffer, addr chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		_, _ = tail.Write([]byte(line + "\n"))
		if m := listenLine.FindStringSubmatch(line); m != nil {
			select {
			case addr <- net.JoinHostPort(m[1], m[2]):
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// kill ends the adapter's whole process tree at once and waits for it.
func (p *adapterProc) kill() {
	if p.cmd == nil {
		_ = p.conn.Close()
		<-p.exited
		return
	}
	p.killGroup(p.tree())
	if p.conn != nil {
		_ = p.conn.Close()
	}
	<-p.exited
}

// stop closes the connection, gives the adapter grace to exit, then kills
// its process tree.
func (p *adapterProc) stop(grace time.Duration) {
	// Taken first: once the adapter exits its children are reparented and
	// can no longer be told apart. lldb-dap starts lldb-server with
	// --setsid, outside the adapter's group, and the debuggee below it.
	tree := p.tree()
	if p.conn != nil {
		_ = p.conn.Close()
	}
	if p.cmd == nil {
		<-p.exited // the connection closed: a dialled adapter is not ours, an in-process one ends what it started
		return
	}
	select {
	case <-p.exited:
		p.killGroup(tree)
	case <-time.After(grace):
		proctree.KillAll(tree)
		p.kill()
	}
}

// killGroup SIGKILLs the adapter's process group and tree and waits until
// they are gone. The group is listed afresh: an adapter may have forked
// since tree was taken (lldb-dap's crash handler starts llvm-symbolizer when
// its stdin closes), and a killed process still exiting would outlive the
// session.
func (p *adapterProc) killGroup(tree []proctree.Ref) {
	proctree.KillGroup(p.cmd.Process.Pid, tree)
	proctree.Forget(p.cmd.Process.Pid)
}

type stdioConn struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (c *stdioConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *stdioConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c *stdioConn) Close() error {
	return errors.Join(c.w.Close(), ignoreClosed(c.r.Close()))
}

func ignoreClosed(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

// tailBuffer keeps the last max bytes written to it. Safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
