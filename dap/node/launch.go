//go:build !windows

package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	godap "github.com/google/go-dap"
)

// launchArgs are the launch configuration keys the adapter reads (those of
// VS Code's node/pwa-node); others are ignored.
type launchArgs struct {
	Program           string            `json:"program"`
	Args              []string          `json:"args"`
	Cwd               string            `json:"cwd"`
	Env               map[string]string `json:"env"`
	RuntimeExecutable string            `json:"runtimeExecutable"`
	RuntimeArgs       []string          `json:"runtimeArgs"`
	StopOnEntry       bool              `json:"stopOnEntry"`
	SourceMaps        *bool             `json:"sourceMaps"`
}

// attachArgs: an inspector by address and port, or a running process by
// pid (sent SIGUSR1, which opens its inspector on 127.0.0.1:9229).
type attachArgs struct {
	Address string `json:"address"`
	Port    any    `json:"port"` // a number, or a string of one

	ProcessID  any   `json:"processId"`
	SourceMaps *bool `json:"sourceMaps"`
}

// startWait bounds a launch from node's start to its first line.
const startWait = 15 * time.Second

// launch starts node on the program, paused before its first line, and
// reports initialized: breakpoints set now bind before any of it runs.
func (d *debugger) launch(ctx context.Context, raw json.RawMessage) error {
	var a launchArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("reading the launch configuration: %w", err)
	}
	if a.Program == "" {
		return errors.New("a Node launch needs a program")
	}
	dir := a.Cwd
	if dir == "" {
		dir = d.s.opts.Dir
	}
	program := a.Program
	if !filepath.IsAbs(program) {
		program = filepath.Join(dir, program)
	}
	if !exists(program) {
		return fmt.Errorf("program %s does not exist", program)
	}
	nodeBin := d.s.opts.Node
	if a.RuntimeExecutable != "" {
		nodeBin = a.RuntimeExecutable
	}
	env := slices.Clone(d.s.opts.Environ)
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		env = append(env, k+"="+a.Env[k])
	}
	d.mu.Lock()
	d.request, d.stopEntry = "launch", a.StopOnEntry
	d.sourceMap = a.SourceMaps == nil || *a.SourceMaps
	d.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	proc, wsURL, err := d.warmNode(nodeBin, env, &a, program, dir) // warm_run.go
	if proc == nil {
		args := append(slices.Clone(a.RuntimeArgs), program)
		proc, wsURL, err = startNode(ctx, launchSpec{node: nodeBin, args: append(args, a.Args...), dir: dir, env: env}, d.s.output)
	}
	if err != nil {
		return err
	}
	d.mu.Lock()
	ending := d.ending
	d.proc = proc
	d.mu.Unlock()
	if ending { // disconnected while node started
		proc.kill()
		return errors.New("the session ended during the launch")
	}
	d.s.event("process", godap.ProcessEventBody{Name: program, SystemProcessId: proc.cmd.Process.Pid, IsLocalProcess: true, StartMethod: "launch"})
	fail := func(err error) error {
		// node waits for a debugger forever: it must not outlive a
		// launch that failed.
		proc.kill()
		return fmt.Errorf("%w; node's stderr: %s", err, proc.stderrTail())
	}
	if err := d.connect(ctx, wsURL); err != nil {
		return fail(err)
	}
	if err := d.runWarm(ctx); err != nil {
		return fail(err)
	}
	select {
	case <-d.started:
	case <-proc.exited:
		// Told after the exited and terminated events, so the client
		// knows the session ended (the program crashed at start).
		select {
		case <-d.terminated:
		case <-ctx.Done():
		}
		return fmt.Errorf("node exited with code %d before the program started: %s", proc.code, proc.stderrTail())
	case <-ctx.Done():
		return fail(fmt.Errorf("node did not reach the program's first line within %s", startWait))
	}
	d.s.event("initialized", nil)
	return nil
}

// attach connects to a node already running, by inspector address or pid.
func (d *debugger) attach(ctx context.Context, raw json.RawMessage) error {
	var a attachArgs
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("reading the attach configuration: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	host := a.Address
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	port, err := numberOf("port", a.Port)
	if err != nil {
		return err
	}
	pid, err := numberOf("processId", a.ProcessID)
	if err != nil {
		return err
	}
	switch {
	case pid > 0:
		// SIGUSR1 makes node open its inspector on the default port.
		if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
			return fmt.Errorf("signalling process %d to open its inspector: %w", pid, err)
		}
		if port == 0 {
			port = 9229
		}
	case port == 0:
		return errors.New("a Node attach needs port (an inspector started with --inspect) or processId")
	}
	wsURL, err := targetURL(ctx, net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.request, d.attached = "attach", true
	d.sourceMap = a.SourceMaps == nil || *a.SourceMaps
	d.mu.Unlock()
	if err := d.connect(ctx, wsURL); err != nil {
		return err
	}
	if pid > 0 {
		d.s.event("process", godap.ProcessEventBody{Name: "node", SystemProcessId: pid, IsLocalProcess: true, StartMethod: "attach"})
	}
	d.startedOnce.Do(func() { close(d.started) })
	d.s.event("initialized", nil)
	return nil
}

// numberOf reads a JSON number, or a string holding one, as an int.
func numberOf(field string, v any) (int, error) {
	switch p := v.(type) {
	case nil:
		return 0, nil
	case float64:
		return int(p), nil
	case string:
		if p == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return 0, fmt.Errorf("%s %q is not a number", field, p)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s %v is not a number", field, v)
}
