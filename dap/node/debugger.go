//go:build !windows

package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	cdpdebugger "github.com/chromedp/cdproto/debugger"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	godap "github.com/google/go-dap"
)

// debugger is the state of one debuggee seen through CDP: its scripts, the
// breakpoints as DAP asked for them and as V8 bound them, and the current
// pause with the handles (frames, scopes, objects) valid until it resumes.
//
// Its fields are guarded by mu, which is never held across a CDP call or a
// DAP write. CDP events arrive on the Conn's read goroutine (onEvent) and
// requests on the server's handler goroutines; work an event needs that
// calls CDP (resuming a pause nobody should see) runs on a goroutine of its
// own, counted by work.
type debugger struct {
	s *server

	mu        sync.Mutex
	conn      *Conn
	proc      *process // nil for an attach
	attached  bool
	request   string // launch or attach
	sourceMap bool   // map scripts through their source maps
	stopEntry bool
	contextID cdpruntime.ExecutionContextID
	warmKey   *warmKey // a warm node could serve this launch (warm.go)
	warm      *warmRun // the launch runs on a warm node (warm_run.go)

	scripts map[cdp.ScriptID]*script
	files   map[string][]*breakpoint // by the path DAP named
	byCDP   map[cdpdebugger.BreakpointID]*breakpoint
	funcs   []*breakpoint
	nextBp  int

	paused     *pause
	nextReason string // why the next pause happens, when we asked for it
	handles    map[int]any
	nextHandle int

	started     chan struct{} // closed at the first pause of a launch, or when attached
	terminated  chan struct{} // closed once the terminated event was sent
	startedOnce sync.Once
	configured  bool
	ending      bool // shutdown began: no more events of the program

	work    sync.WaitGroup
	endOnce sync.Once
}

// script is one script V8 parsed.
type script struct {
	id      cdp.ScriptID
	url     string
	path    string // "" for node: internals and eval'd code
	mapURL  string
	sm      *sourceMap
	smTried bool
}

// pause is the program stopped.
type pause struct {
	frames  []*cdpdebugger.CallFrame
	visible bool // reported to the client with a stopped event
	// thrown is the value of an exception pause (exception.go), else nil.
	thrown jsonv2.Value
}

func newDebugger(s *server) *debugger {
	return &debugger{s: s, scripts: map[cdp.ScriptID]*script{}, files: map[string][]*breakpoint{},
		byCDP: map[cdpdebugger.BreakpointID]*breakpoint{}, handles: map[int]any{}, started: make(chan struct{}), terminated: make(chan struct{})}
}

// dispatch runs one DAP request and returns its response body.
func (d *debugger) dispatch(ctx context.Context, req *request) (any, error) {
	switch m := req.msg.(type) {
	case *godap.InitializeRequest:
		return capabilities(), nil
	case *godap.LaunchRequest:
		return nil, d.launch(ctx, m.Arguments)
	case *godap.AttachRequest:
		return nil, d.attach(ctx, m.Arguments)
	case *godap.ConfigurationDoneRequest:
		return nil, d.configurationDone(ctx)
	case *godap.SetBreakpointsRequest:
		return d.setBreakpoints(ctx, m.Arguments)
	case *godap.SetFunctionBreakpointsRequest:
		return d.setFunctionBreakpoints(ctx, m.Arguments)
	case *godap.SetExceptionBreakpointsRequest:
		return nil, d.setExceptionBreakpoints(ctx, m.Arguments.Filters)
	case *godap.ExceptionInfoRequest:
		return d.exceptionInfo()
	case *godap.ThreadsRequest:
		return godap.ThreadsResponseBody{Threads: []godap.Thread{{Id: threadID, Name: "main"}}}, nil
	case *godap.StackTraceRequest:
		d.loadMapsOfPause()
		return d.stackTrace(m.Arguments)
	case *godap.ScopesRequest:
		return d.scopes(m.Arguments.FrameId)
	case *godap.VariablesRequest:
		return d.variables(ctx, m.Arguments.VariablesReference)
	case *godap.EvaluateRequest:
		return d.evaluate(ctx, m.Arguments)
	case *godap.ContinueRequest:
		return godap.ContinueResponseBody{AllThreadsContinued: true}, d.resume(ctx, "", cdpdebugger.Resume.Method)
	case *godap.NextRequest:
		return nil, d.resume(ctx, "step", cdpdebugger.StepOver.Method)
	case *godap.StepInRequest:
		return nil, d.resume(ctx, "step", cdpdebugger.StepInto.Method)
	case *godap.StepOutRequest:
		return nil, d.resume(ctx, "step", cdpdebugger.StepOut.Method)
	case *godap.PauseRequest:
		return nil, d.pause(ctx)
	case *godap.DisconnectRequest:
		// go-dap's bool cannot tell "false" from absent: read it raw.
		var args struct {
			Arguments struct {
				TerminateDebuggee *bool `json:"terminateDebuggee"`
			} `json:"arguments"`
		}
		_ = json.Unmarshal(req.raw, &args)
		d.mu.Lock()
		term := d.request != "attach"
		d.mu.Unlock()
		if args.Arguments.TerminateDebuggee != nil {
			term = *args.Arguments.TerminateDebuggee
		}
		d.shutdown(term)
		return nil, nil
	case *godap.TerminateRequest:
		d.shutdown(true)
		return nil, nil
	}
	return nil, fmt.Errorf("the Node adapter does not support %s", req.command)
}

// threadID is the one thread a Node program has for DAP.
const threadID = 1

func capabilities() godap.Capabilities {
	return godap.Capabilities{
		SupportsConfigurationDoneRequest:  true,
		SupportsFunctionBreakpoints:       true,
		SupportsConditionalBreakpoints:    true,
		SupportsHitConditionalBreakpoints: true,
		SupportsLogPoints:                 true,
		SupportsEvaluateForHovers:         true,
		SupportsTerminateRequest:          true,
		SupportsExceptionInfoRequest:      true,
		ExceptionBreakpointFilters: []godap.ExceptionBreakpointsFilter{
			{Filter: "all", Label: "All Exceptions", Description: "Pause on every exception thrown, caught or not."},
			{Filter: "uncaught", Label: "Uncaught Exceptions", Description: "Pause on exceptions nothing catches."},
		},
	}
}

// connect dials the inspector, enables the domains and lets a waiting
// program run up to its first line. A warm node comes connected and
// enabled (warm_run.go).
func (d *debugger) connect(ctx context.Context, wsURL string) error {
	if d.adoptWarm() {
		return nil
	}
	conn, err := Dial(ctx, wsURL, DialOptions{OnEvent: d.onEvent, Record: d.s.opts.Record})
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.conn = conn
	d.mu.Unlock()
	d.work.Go(func() { d.watchConn(conn) })
	for _, step := range []func() error{
		func() error { _, err := cdp.Call(ctx, conn, cdpruntime.Enable, cdp.Empty{}); return err },
		func() error {
			_, err := cdp.Call(ctx, conn, cdpdebugger.Enable, cdpdebugger.EnableParams{})
			return err
		},
		func() error {
			_, err := cdp.Call(ctx, conn, cdpdebugger.SetAsyncCallStackDepth, cdpdebugger.SetAsyncCallStackDepthParams{MaxDepth: 0})
			return err
		},
		func() error {
			_, err := cdp.Call(ctx, conn, cdpruntime.RunIfWaitingForDebugger, cdp.Empty{})
			return err
		},
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// watchConn ends the session when the inspector connection closes: a
// launched node is waited for (its exit code is the exited event), an
// attached one is left alone.
func (d *debugger) watchConn(conn *Conn) {
	<-conn.Done()
	d.mu.Lock()
	proc := d.proc
	d.mu.Unlock()
	if proc != nil {
		select {
		case <-proc.exited:
		case <-time.After(exitWait):
			// The inspector let go but node lives on (it waits for a
			// debugger in a child?): it is ours, and the session is over.
			proc.kill()
		}
		d.s.event("exited", godap.ExitedEventBody{ExitCode: proc.code})
		if key, ok := d.warmable(); ok {
			// The program has ended; the session may stay open.
			d.s.opts.Warm.refill(key)
		}
	}
	d.s.event("terminated", godap.TerminatedEventBody{})
	close(d.terminated)
}

// exitWait is how long a launched node may take to exit once its inspector
// connection closed.
const exitWait = 5 * time.Second

// onEvent runs on the Conn's read goroutine, in wire order.
func (d *debugger) onEvent(method string, params jsonv2.Value) {
	switch method {
	case cdpdebugger.ScriptParsed.Method:
		var ev cdpdebugger.EventScriptParsed
		if decode(params, &ev) {
			d.scriptParsed(&ev)
		}
	case "Debugger.breakpointResolved": // not in cdproto since V8 16; Node 20 sends it
		var ev struct {
			BreakpointID cdpdebugger.BreakpointID `json:"breakpointId"`
			Location     *cdpdebugger.Location    `json:"location"`
		}
		if decode(params, &ev) && ev.Location != nil {
			d.breakpointResolved(ev.BreakpointID, ev.Location)
		}
	case cdpdebugger.Paused.Method:
		var ev cdpdebugger.EventPaused
		if decode(params, &ev) {
			d.onPaused(&ev)
		}
	case cdpdebugger.Resumed.Method:
		d.mu.Lock()
		visible := d.paused != nil && d.paused.visible
		d.paused = nil
		clear(d.handles)
		d.mu.Unlock()
		if visible {
			d.s.event("continued", godap.ContinuedEventBody{ThreadId: threadID, AllThreadsContinued: true})
		}
	case cdpruntime.ExecutionContextCreated.Method:
		var ev cdpruntime.EventExecutionContextCreated
		if decode(params, &ev) && ev.Context != nil {
			d.mu.Lock()
			if d.contextID == 0 {
				d.contextID = ev.Context.ID
			}
			d.mu.Unlock()
		}
	case cdpruntime.ExecutionContextDestroyed.Method:
		// The program finished; node waits for the debugger to let go
		// before it exits.
		d.mu.Lock()
		conn := d.conn
		d.mu.Unlock()
		d.work.Go(func() { _ = conn.Close() })
	case cdpruntime.ConsoleAPICalled.Method:
		d.mu.Lock()
		attached := d.attached
		d.mu.Unlock()
		var ev cdpruntime.EventConsoleAPICalled
		// A launch forwards node's stdout and stderr, which console
		// calls write to; an attached program's are not ours.
		if attached && decode(params, &ev) {
			d.s.output("console", consoleText(&ev))
		}
	}
}

func decode(params jsonv2.Value, v any) bool {
	return jsonv2.Unmarshal(params, v, jsonv2.AllowInvalidUTF8(true)) == nil
}

func consoleText(ev *cdpruntime.EventConsoleAPICalled) string {
	parts := make([]string, 0, len(ev.Args))
	for _, a := range ev.Args {
		if a.Type == cdpruntime.RemoteObjectTypeString {
			var s string
			if json.Unmarshal(a.Value, &s) == nil {
				parts = append(parts, s)
				continue
			}
		}
		parts = append(parts, formatValue(a))
	}
	return strings.Join(parts, " ") + "\n"
}

func (d *debugger) scriptParsed(ev *cdpdebugger.EventScriptParsed) {
	sc := &script{id: ev.ScriptID, url: ev.URL, mapURL: ev.SourceMapURL}
	if p, ok := urlToPath(ev.URL); ok {
		sc.path = p
	}
	d.mu.Lock()
	d.scripts[ev.ScriptID] = sc
	pendingFuncs := sc.path != "" && d.configured && d.hasPendingFuncsLocked()
	pendingMapped := sc.path != "" && sc.mapURL != "" && d.sourceMap && len(d.pendingLocked()) > 0
	d.mu.Unlock()
	if pendingFuncs {
		d.work.Go(func() { d.bindFunctions(d.s.ctx, []*script{sc}) })
	}
	if pendingMapped {
		// Usually the instrumentation pause binds them before the script
		// runs; this covers scripts parsed before it was set (an attach).
		d.work.Go(func() { d.bindPending(d.s.ctx, sc) })
	}
}

// onPaused decides what a pause is: the first line of a launch, a
// breakpoint whose hit condition is not met yet or an instrumentation stop
// (both resumed without telling the client), or a stop to report.
func (d *debugger) onPaused(ev *cdpdebugger.EventPaused) {
	reason := string(ev.Reason)
	d.mu.Lock()
	p := &pause{frames: d.trimLoaderLocked(ev.CallFrames)}
	d.paused = p
	clear(d.handles)
	if !d.configured {
		// The first line (--inspect-brk): held until configurationDone.
		d.mu.Unlock()
		d.startedOnce.Do(func() { close(d.started) })
		return
	}
	if reason == "instrumentation" {
		d.mu.Unlock()
		d.work.Go(func() { d.afterInstrumentation(d.s.ctx, ev.Data) })
		return
	}
	var hit []int
	stop := len(ev.HitBreakpoints) == 0
	for _, id := range ev.HitBreakpoints {
		if bp := d.byCDP[cdpdebugger.BreakpointID(id)]; bp != nil {
			bp.hits++
			if bp.hitCond.met(bp.hits) {
				stop = true
				hit = append(hit, bp.id)
			}
		} else {
			stop = true // a breakpoint we do not know of (set by another client)
		}
	}
	asked := d.nextReason
	if !stop && asked == "" && reason != string(cdpdebugger.PausedReasonException) && reason != string(cdpdebugger.PausedReasonPromiseRejection) {
		d.mu.Unlock()
		d.work.Go(func() { d.resumeQuietly(d.s.ctx) })
		return
	}
	d.nextReason = ""
	p.visible = true
	d.mu.Unlock()

	body := godap.StoppedEventBody{ThreadId: threadID, AllThreadsStopped: true}
	switch {
	case len(hit) > 0:
		body.Reason, body.HitBreakpointIds = "breakpoint", hit
	case reason == string(cdpdebugger.PausedReasonException) || reason == string(cdpdebugger.PausedReasonPromiseRejection):
		body.Reason, body.Description, body.Text = "exception", "Paused on exception", exceptionText(ev.Data)
		d.mu.Lock()
		p.thrown = ev.Data
		d.mu.Unlock()
	case asked != "":
		body.Reason = asked
	case reason == "Break on start":
		body.Reason, body.Description = "entry", "Break on start"
	default:
		body.Reason, body.Description = "pause", "paused ("+reason+", a debugger statement?)"
	}
	d.s.event("stopped", body)
}

// exceptionText is the first line of a thrown value's description
// ("Error: boom"), or its value.
func exceptionText(data jsonv2.Value) string {
	var ro cdpruntime.RemoteObject
	if len(data) == 0 || !decode(data, &ro) {
		return ""
	}
	if ro.Description != "" {
		first, _, _ := strings.Cut(ro.Description, "\n")
		return first
	}
	return formatValue(&ro)
}

func (d *debugger) resumeQuietly(ctx context.Context) {
	d.mu.Lock()
	conn := d.conn
	d.mu.Unlock()
	_, _ = cdp.Call(ctx, conn, cdpdebugger.Resume, cdpdebugger.ResumeParams{})
}

// live returns the inspector connection, or an error before launch/attach.
func (d *debugger) live() (*Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn == nil {
		return nil, errors.New("not launched or attached yet")
	}
	return d.conn, nil
}

// configurationDone lets the program run: a launch paused on its first line
// stays there (stopped, reason entry) with stopOnEntry and resumes
// otherwise.
func (d *debugger) configurationDone(ctx context.Context) error {
	conn, err := d.live()
	if err != nil {
		return err
	}
	if _, err := cdp.Call(ctx, conn, cdpdebugger.SetInstrumentationBreakpoint,
		cdpdebugger.SetInstrumentationBreakpointParams{Instrumentation: cdpdebugger.SetInstrumentationBreakpointInstrumentationBeforeScriptWithSourceMapExecution}); err != nil {
		return err
	}
	d.mu.Lock()
	d.configured = true
	entry := d.stopEntry && d.paused != nil
	paused := d.paused != nil
	if entry {
		d.paused.visible = true
	}
	d.mu.Unlock()
	if entry {
		d.s.event("stopped", godap.StoppedEventBody{Reason: "entry", Description: "Break on start", ThreadId: threadID, AllThreadsStopped: true})
		return nil
	}
	if paused {
		_, err = cdp.Call(ctx, conn, cdpdebugger.Resume, cdpdebugger.ResumeParams{})
	}
	return err
}

// resume sends a resume or step command; reason names the stop it causes.
func (d *debugger) resume(ctx context.Context, reason, method string) error {
	conn, err := d.live()
	if err != nil {
		return err
	}
	d.mu.Lock()
	if d.paused == nil {
		d.mu.Unlock()
		return errors.New("the program is running")
	}
	d.nextReason = reason
	d.mu.Unlock()
	return conn.Call(ctx, method, struct{}{}, nil)
}

func (d *debugger) pause(ctx context.Context) error {
	conn, err := d.live()
	if err != nil {
		return err
	}
	d.mu.Lock()
	if d.paused != nil {
		d.mu.Unlock()
		return nil
	}
	d.nextReason = "pause"
	d.mu.Unlock()
	_, err = cdp.Call(ctx, conn, cdpdebugger.Pause, cdp.Empty{})
	return err
}

// shutdown ends the session once: terminate kills a launched node's whole
// process tree; otherwise the program is detached (breakpoints removed,
// resumed) and keeps running.
func (d *debugger) shutdown(terminate bool) {
	d.endOnce.Do(func() {
		d.mu.Lock()
		d.ending = true
		conn, proc := d.conn, d.proc
		bps := make([]cdpdebugger.BreakpointID, 0, len(d.byCDP))
		for id := range d.byCDP {
			bps = append(bps, id)
		}
		d.mu.Unlock()
		if proc != nil && terminate {
			proc.kill()
		} else if conn != nil {
			// Detach: the program must run on as if never debugged.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			for _, id := range bps {
				_, _ = cdp.Call(ctx, conn, cdpdebugger.RemoveBreakpoint, cdpdebugger.RemoveBreakpointParams{BreakpointID: id})
			}
			_, _ = cdp.Call(ctx, conn, cdpdebugger.SetPauseOnExceptions, cdpdebugger.SetPauseOnExceptionsParams{State: cdpdebugger.SetPauseOnExceptionsStateNone})
			_, _ = cdp.Call(ctx, conn, cdpdebugger.Resume, cdpdebugger.ResumeParams{})
			_, _ = cdp.Call(ctx, conn, cdpdebugger.Disable, cdp.Empty{})
			_, _ = cdp.Call(ctx, conn, cdpruntime.RunIfWaitingForDebugger, cdp.Empty{})
			cancel()
		}
		if conn != nil {
			_ = conn.Close()
		}
		d.work.Wait()
		if proc != nil && terminate {
			<-proc.exited
		}
	})
}

// cleanPath resolves symbolic links, as node does for the scripts it loads,
// so a breakpoint path and a script path compare equal.
func cleanPath(p string) string {
	if !filepath.IsAbs(p) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return filepath.Clean(p)
}

// exists reports whether p names a file.
func exists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}
