//go:build !windows

package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/chromedp/cdproto/cdp"
	cdpdebugger "github.com/chromedp/cdproto/debugger"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	godap "github.com/google/go-dap"
)

// A launch on a warm node (warm.go), as the debugger sees it: it connects
// at launch, runs the program at configurationDone (breakpoints are set by
// then), shows the program's entry pause with stopOnEntry as a cold launch
// does and resumes it otherwise, and cuts the loader from every stack.

// warmRun is the debugger's part of a launch on a warm node.
type warmRun struct {
	loader  string // the loader's path, links resolved
	program string // the program's path, links resolved
	argv    []string
	cwd     string
	ran     bool // the runner was called
	entered bool // the program's entry pause was seen
}

// launchWarm connects to a warm node instead of starting one. The program
// is not running yet: launch is done once the inspector is connected, and
// configurationDone runs it (runWarm).
func (d *debugger) launchWarm(ctx context.Context, w *warmNode, program string, args []string, dir string) error {
	d.mu.Lock()
	ending := d.ending
	d.proc = w.proc
	d.warm = &warmRun{loader: w.loader, program: cleanPath(program), argv: append([]string{program}, args...), cwd: dir}
	d.mu.Unlock()
	w.out.attach(d.s.output)
	if ending {
		w.proc.kill()
		return errors.New("the session ended during the launch")
	}
	d.s.event("process", godap.ProcessEventBody{Name: program, SystemProcessId: w.proc.cmd.Process.Pid, IsLocalProcess: true, StartMethod: "launch"})
	if err := d.connect(ctx, w.wsURL); err != nil {
		w.proc.kill()
		return fmt.Errorf("%w; node's stderr: %s", err, w.proc.stderrTail())
	}
	d.startedOnce.Do(func() { close(d.started) })
	d.s.event("initialized", nil)
	return nil
}

// runWarm runs the program of a warm launch, once. It does nothing for a
// cold launch.
func (d *debugger) runWarm(ctx context.Context, conn *Conn) error {
	d.mu.Lock()
	run := d.warm
	if run == nil || run.ran {
		d.mu.Unlock()
		return nil
	}
	run.ran = true
	d.mu.Unlock()
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

// warmEntryLocked handles, with d.mu held, the program's entry pause on a
// warm node (node's "Break on start", which a cold launch makes before
// configurationDone): it reports whether ev is that pause and whether to
// show it (stopOnEntry; the caller resumes it otherwise).
func (d *debugger) warmEntryLocked(ev *cdpdebugger.EventPaused, p *pause) (entry, show bool) {
	run := d.warm
	if run == nil || run.entered || string(ev.Reason) != "Break on start" {
		return false, false
	}
	run.entered = true
	if d.stopEntry {
		p.visible = true
	}
	return true, d.stopEntry
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
