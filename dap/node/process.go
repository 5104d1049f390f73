//go:build !windows

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/proctree"
)

// inspectorWait is how long a launched node may take to print its
// inspector URL.
const inspectorWait = 10 * time.Second

// process is a node the adapter launched: in a process group of its own,
// killed with this process (proctree.Start), its stdout and stderr forwarded as
// output.
type process struct {
	cmd    *exec.Cmd
	ref    proctree.Ref
	exited chan struct{} // closed once Wait returned
	code   int           // exit code, valid after exited

	mu     sync.Mutex
	stderr []string // the last lines of stderr, for error reports
}

// launchSpec is what to start.
type launchSpec struct {
	node string
	args []string // runtimeArgs, then the program and its args
	dir  string
	env  []string
}

// startNode starts node with --inspect-brk on a free port and returns once
// it printed its inspector URL. out receives the program's output lines
// (category stdout or stderr). A node that exits first, or prints no URL
// within inspectorWait (or before ctx ends), is killed and an error names
// its stderr.
func startNode(ctx context.Context, spec launchSpec, out func(category, text string)) (*process, string, error) {
	args := append([]string{"--inspect-brk=127.0.0.1:0"}, spec.args...)
	cmd := exec.Command(spec.node, args...)
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := proctree.Start(cmd); err != nil {
		return nil, "", fmt.Errorf("starting %s: %w", spec.node, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	p.ref, _ = proctree.Of(cmd.Process.Pid)
	urlc := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Go(func() { pump(stdout, func(s string) { out("stdout", s) }) })
	readers.Go(func() {
		scanStderr(stderr, urlc, func(s string) {
			p.keepStderr(s)
			out("stderr", s)
		})
	})
	go func() {
		readers.Wait() // Wait closes the pipes: the last output first
		err := cmd.Wait()
		proctree.Reaped(cmd.Process.Pid)
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		default:
			p.code = -1
		}
		close(p.exited)
	}()
	wait := time.NewTimer(inspectorWait)
	defer wait.Stop()
	select {
	case u := <-urlc:
		return p, u, nil
	case <-p.exited:
		return nil, "", fmt.Errorf("node exited with code %d before its inspector listened; stderr: %s", p.code, p.stderrTail())
	case <-wait.C:
		p.kill()
		return nil, "", fmt.Errorf("node printed no inspector URL within %s; stderr: %s", inspectorWait, p.stderrTail())
	case <-ctx.Done():
		p.kill()
		return nil, "", fmt.Errorf("waiting for node's inspector: %w", ctx.Err())
	}
}

// pump forwards r line by line (a partial last line too).
func pump(r io.Reader, out func(string)) {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := r.Read(buf)
		pending = append(pending, buf[:n]...)
		if i := strings.LastIndexByte(string(pending), '\n'); i >= 0 {
			out(string(pending[:i+1]))
			pending = append(pending[:0], pending[i+1:]...)
		}
		if err != nil {
			if len(pending) > 0 {
				out(string(pending))
			}
			return
		}
	}
}

const keptStderrLines = 20

func (p *process) keepStderr(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for line := range strings.SplitSeq(strings.TrimRight(s, "\n"), "\n") {
		p.stderr = append(p.stderr, line)
	}
	if over := len(p.stderr) - keptStderrLines; over > 0 {
		p.stderr = p.stderr[over:]
	}
}

func (p *process) stderrTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stderr) == 0 {
		return "(empty)"
	}
	return strings.Join(p.stderr, "\n")
}

// kill ends node's process group and every process below it, and waits
// until node has been reaped.
func (p *process) kill() {
	proctree.KillGroup(p.cmd.Process.Pid, append(proctree.Descendants(p.cmd.Process.Pid), p.ref))
	proctree.Forget(p.cmd.Process.Pid)
	<-p.exited
}
