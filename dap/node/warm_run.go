//go:build !windows

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/chromedp/cdproto/cdp"
	cdpdebugger "github.com/chromedp/cdproto/debugger"
	cdpruntime "github.com/chromedp/cdproto/runtime"
)

// A launch on a warm node (warm.go), as the debugger sees it: the node is
// taken instead of started, its connection adopted, and the program run with
// the loader's runner; from there it is a cold launch (node pauses at the
// program's first line, "Break on start", and the launch waits for that),
// except that the loader is cut from every stack.

// warmRun is the debugger's part of a launch on a warm node.
type warmRun struct {
	conn   *Conn // connected and enabled by the pool (not recorded: Options.Record)
	events *eventRelay
	loader string // the loader's path, links resolved
	argv   []string
	cwd    string
}

// warmNode takes a warm node for a launch of program in dir with node
// binary nodeBin and environment env, and returns its process and
// inspector URL; a nil process when none fits (start one cold). A launch
// that a warm node could serve is marked so, whether one was ready or not
// (the session leaves one made for the next: warmable).
func (d *debugger) warmNode(nodeBin string, env []string, a *launchArgs, program, dir string) (*process, string, error) {
	key, ok := warmKeyOf(nodeBin, env, a)
	// A relative cwd would be taken from the warm node's directory; a
	// recorded session records its CDP transcript from the start, which a
	// warm node's connection, made ahead, has not.
	if !ok || d.s.opts.Warm == nil || !filepath.IsAbs(dir) || !isDir(dir) || d.s.opts.Record != nil {
		return nil, "", nil
	}
	d.mu.Lock()
	d.warmKey = &key
	d.mu.Unlock()
	w := d.s.opts.Warm.take(key)
	if w == nil {
		return nil, "", nil
	}
	w.out.attach(d.s.output)
	d.mu.Lock()
	d.warm = &warmRun{conn: w.conn, events: w.events, loader: w.loader, argv: append([]string{program}, a.Args...), cwd: dir}
	d.mu.Unlock()
	return w.proc, w.wsURL, nil
}

// adoptWarm makes a warm node's connection the session's, replaying the
// events it has had; false for a cold launch.
func (d *debugger) adoptWarm() bool {
	d.mu.Lock()
	run := d.warm
	if run == nil {
		d.mu.Unlock()
		return false
	}
	d.conn = run.conn
	d.mu.Unlock()
	d.work.Go(func() { d.watchConn(run.conn) })
	run.events.attach(d.onEvent)
	return true
}

// runWarm runs the program of a warm launch. It does nothing for a cold
// launch.
func (d *debugger) runWarm(ctx context.Context) error {
	d.mu.Lock()
	run, conn := d.warm, d.conn
	d.mu.Unlock()
	if run == nil {
		return nil
	}
	argv, _ := json.Marshal(run.argv)
	cwd, _ := json.Marshal(run.cwd)
	res, err := cdp.Call(ctx, conn, cdpruntime.Evaluate, cdpruntime.EvaluateParams{
		Expression: fmt.Sprintf("globalThis.%s(%s, %s)", runnerName, argv, cwd)})
	if err != nil {
		return fmt.Errorf("running the program on the warm node: %w", err)
	}
	if res.ExceptionDetails != nil {
		return fmt.Errorf("running the program on the warm node: %s", res.ExceptionDetails.Text)
	}
	return nil
}

// trimLoaderLocked cuts a warm node's loader frame, and the frames below
// it (node's timers), from a stack: they are not the program's.
func (d *debugger) trimLoaderLocked(frames []*cdpdebugger.CallFrame) []*cdpdebugger.CallFrame {
	if d.warm == nil {
		return frames
	}
	for i, f := range frames {
		if sc := d.scripts[f.Location.ScriptID]; sc != nil && sc.path == d.warm.loader {
			return frames[:i]
		}
	}
	return frames
}

// warmable is the key of a launch a warm node could serve, and whether
// there was one: the session leaves a warm node made for it.
func (d *debugger) warmable() (warmKey, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.warmKey == nil {
		return warmKey{}, false
	}
	return *d.warmKey, true
}

// isDir reports whether p names a directory.
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
