package dap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// adapterProc is a running adapter process in its own process group, with
// the tail of its stderr kept for error reports.
type adapterProc struct {
	cmd    *exec.Cmd
	conn   io.ReadWriteCloser // stdio pipes or the TCP connection
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
	tree := descendantsOf(p.cmd.Process.Pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known == nil {
		p.known = make(map[int]uint64)
	}
	for _, q := range tree {
		p.known[q.pid] = q.start
	}
}

// tree is the adapter's descendants now plus those remembered.
func (p *adapterProc) tree() []procRef {
	if p.cmd == nil {
		return nil // dialled: not ours
	}
	tree := descendantsOf(p.cmd.Process.Pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	for pid, start := range p.known {
		tree = append(tree, procRef{pid, start})
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
}

var listenLine = regexp.MustCompile(`listening at:?\s*\[?([0-9a-fA-F.:]+?)\]?:(\d+)`)

// startAdapter starts spec with its own process group, killed with the
// bridge (Pdeathsig), and connects a Client to it.
func startAdapter(ctx context.Context, spec Command, dir string, env []string, onEvent func(*Message)) (*adapterProc, error) {
	if spec.Dial != "" {
		return dialAdapter(ctx, spec.Dial, onEvent)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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
	if err := cmd.Start(); err != nil {
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
		p.client = NewClient(stdout, stdin, onEvent)
		readers.Go(func() { <-p.client.Done() })
	}
	go func() {
		readers.Wait()
		_ = cmd.Wait()
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
	p.conn = conn
	p.client = NewClient(conn, conn, onEvent)
	return p, nil
}

// dialAdapter connects to an adapter that some other process runs; the
// adapterProc has no process, and "exits" when the connection closes.
func dialAdapter(ctx context.Context, addr string, onEvent func(*Message)) (*adapterProc, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to the debug adapter at %s: %w", addr, err)
	}
	p := &adapterProc{conn: conn, stderr: newTailBuffer(8 << 10), exited: make(chan struct{})}
	p.client = NewClient(conn, conn, onEvent)
	go func() {
		<-p.client.Done()
		close(p.exited)
	}()
	return p, nil
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
		<-p.exited // the connection closed: nothing else is ours
		return
	}
	select {
	case <-p.exited:
		p.killGroup(tree)
	case <-time.After(grace):
		killAll(tree)
		p.kill()
	}
}

// procRef names a process by pid and start time, so a pid the kernel has
// given to another process since is never signalled.
type procRef struct {
	pid   int
	start uint64
}

// killGone bounds how long killAll waits for the processes it killed.
const killGone = 2 * time.Second

// killAll SIGKILLs procs and waits (up to killGone) until they are gone: a
// debuggee is lldb-server's child, not ours, so nothing else waits for it,
// and a session that reports it stopped must leave no process behind.
func killAll(procs []procRef) {
	var killed []procRef
	for _, q := range procs {
		if q.running() {
			_ = syscall.Kill(q.pid, syscall.SIGKILL)
			killed = append(killed, q)
		}
	}
	deadline := time.Now().Add(killGone)
	for _, q := range killed {
		for q.running() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// running reports whether q still runs: its pid names the same process
// (same start time) and that process is not a zombie.
func (q procRef) running() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(q.pid) + "/stat")
	if err != nil {
		return false
	}
	f := statFields(b)
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && st == q.start
}

// statFields returns the fields of /proc/pid/stat after the command name
// (the first is the state, field 3).
func statFields(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// procEntry is one process as /proc/PID/stat describes it.
type procEntry struct {
	procRef
	ppid, pgrp int
}

// processes reads every process from /proc.
func processes() []procEntry {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := make([]procEntry, 0, len(stats))
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := statFields(b)
		if len(fields) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		pgrp, _ := strconv.Atoi(fields[2])
		start, _ := strconv.ParseUint(fields[19], 10, 64)
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		out = append(out, procEntry{procRef{pid, start}, ppid, pgrp})
	}
	return out
}

// descendantsOf lists the processes below pid, read from /proc.
func descendantsOf(pid int) []procRef {
	children := map[int][]procRef{}
	for _, e := range processes() {
		children[e.ppid] = append(children[e.ppid], e.procRef)
	}
	var out []procRef
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// groupOf lists the processes of process group pgid.
func groupOf(pgid int) []procRef {
	var out []procRef
	for _, e := range processes() {
		if e.pgrp == pgid {
			out = append(out, e.procRef)
		}
	}
	return out
}

// killGroup SIGKILLs the adapter's process group and tree and waits until
// they are gone. The group is listed afresh: an adapter may have forked
// since tree was taken (lldb-dap's crash handler starts llvm-symbolizer when
// its stdin closes), and a killed process still exiting would outlive the
// session.
func (p *adapterProc) killGroup(tree []procRef) {
	pgid := p.cmd.Process.Pid
	tree = append(tree, groupOf(pgid)...)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	killAll(tree)
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
