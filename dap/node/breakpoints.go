//go:build !windows

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	cdpdebugger "github.com/chromedp/cdproto/debugger"
	godap "github.com/google/go-dap"
)

// Breakpoints. A line breakpoint in a JavaScript file is one
// Debugger.setBreakpointByUrl on a URL pattern, which V8 binds now or when
// the script loads. A breakpoint in a file that a source map names (.ts) is
// set on the generated script's position, now for scripts already loaded,
// and for scripts loaded later at the instrumentation pause V8 makes before
// running a script that has a source map. Conditions are V8's; hit
// conditions are counted here; a logpoint is a condition that logs and
// returns false, so it never stops.

type breakpoint struct {
	id       int
	path     string // the file DAP named, links resolved
	line     int    // as asked, 1-based
	function string // for a function breakpoint
	cond     string // the CDP condition (logpoint included)
	hitCond  hitCondition
	hits     int
	mapped   bool // bound through a source map
	pending  bool // mapped, and no script compiled from path loaded yet
	bad      bool // cannot be set (a bad hit condition); message says why
	cdpIDs   []cdpdebugger.BreakpointID
	verified bool
	actual   int // the line it bound to, in the file DAP named
	message  string
}

// dapBreakpoints is bps as DAP tells them, read under d.mu.
func (d *debugger) dapBreakpoints(bps []*breakpoint) []godap.Breakpoint {
	out := make([]godap.Breakpoint, len(bps))
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, bp := range bps {
		out[i] = bp.dap()
	}
	return out
}

func (bp *breakpoint) dap() godap.Breakpoint {
	out := godap.Breakpoint{Id: bp.id, Verified: bp.verified, Line: bp.actual, Message: bp.message}
	if out.Line == 0 {
		out.Line = bp.line
	}
	if bp.path != "" {
		out.Source = &godap.Source{Name: filepath.Base(bp.path), Path: bp.path}
	}
	return out
}

// scriptExts are the files node runs itself; a breakpoint elsewhere (.ts)
// needs a source map.
var scriptExts = map[string]bool{".js": true, ".mjs": true, ".cjs": true, "": true}

func (d *debugger) setBreakpoints(ctx context.Context, args godap.SetBreakpointsArguments) (any, error) {
	conn, err := d.live()
	if err != nil {
		return nil, err
	}
	path := cleanPath(args.Source.Path)
	d.mu.Lock()
	old := d.files[path]
	delete(d.files, path)
	d.mu.Unlock()
	d.remove(ctx, conn, old)

	mappedFile := !scriptExts[strings.ToLower(filepath.Ext(path))]
	scripts := d.scriptsMapping(path)
	bps := make([]*breakpoint, 0, len(args.Breakpoints))
	for _, sb := range args.Breakpoints {
		bp := d.newBreakpoint(path, sb.Line, sb.Condition, sb.HitCondition, sb.LogMessage)
		bps = append(bps, bp)
		if bp.bad {
			continue
		}
		switch {
		case len(scripts) > 0:
			bp.mapped = true
			for _, sc := range scripts {
				if err := d.bindMapped(ctx, conn, bp, sc); err != nil {
					return nil, err
				}
			}
			if !bp.verified {
				bp.message = "no code at this line in the compiled script"
			}
		case mappedFile:
			bp.mapped, bp.pending = true, true
			bp.message = "pending: binds when a script compiled from this file loads"
		default:
			col := int64(0)
			res, err := cdp.Call(ctx, conn, cdpdebugger.SetBreakpointByURL, cdpdebugger.SetBreakpointByURLParams{
				LineNumber: int64(sb.Line - 1), URLRegex: urlRegex(path), ColumnNumber: &col, Condition: bp.cond})
			if err != nil {
				return nil, err
			}
			bp.cdpIDs = append(bp.cdpIDs, res.BreakpointID)
			if len(res.Locations) > 0 {
				bp.verified, bp.actual = true, int(res.Locations[0].LineNumber)+1
			} else {
				bp.message = "pending: binds when the script loads"
			}
		}
	}
	d.mu.Lock()
	d.files[path] = bps
	for _, bp := range bps {
		for _, id := range bp.cdpIDs {
			d.byCDP[id] = bp
		}
	}
	pending := len(d.pendingLocked()) > 0
	d.mu.Unlock()
	if pending && mappedFile {
		// A script compiled from path may have been parsed meanwhile; one
		// parsed from now on binds them as it is parsed (scriptParsed).
		for _, sc := range d.scriptsMapping(path) {
			d.bindPending(ctx, sc)
		}
	}
	return godap.SetBreakpointsResponseBody{Breakpoints: d.dapBreakpoints(bps)}, nil
}

// remove forgets breakpoints replaced by a new set and clears them in V8.
func (d *debugger) remove(ctx context.Context, conn *Conn, old []*breakpoint) {
	d.mu.Lock()
	for _, bp := range old {
		for _, id := range bp.cdpIDs {
			delete(d.byCDP, id)
		}
	}
	d.mu.Unlock()
	for _, bp := range old {
		for _, id := range bp.cdpIDs {
			_, _ = cdp.Call(ctx, conn, cdpdebugger.RemoveBreakpoint, cdpdebugger.RemoveBreakpointParams{BreakpointID: id})
		}
	}
}

func (d *debugger) newBreakpoint(path string, line int, cond, hit, logMsg string) *breakpoint {
	d.mu.Lock()
	d.nextBp++
	bp := &breakpoint{id: d.nextBp, path: path, line: line, cond: compileCondition(cond, logMsg)}
	d.mu.Unlock()
	h, err := parseHitCondition(hit)
	if err != nil {
		bp.bad, bp.message = true, err.Error()
	}
	bp.hitCond = h
	return bp
}

// bindMapped sets bp in the generated script sc through its source map.
func (d *debugger) bindMapped(ctx context.Context, conn *Conn, bp *breakpoint, sc *script) error {
	sm := d.mapOf(sc)
	if sm == nil {
		return nil
	}
	gen, line, ok := sm.generated(bp.path, bp.line)
	if !ok {
		return nil
	}
	col := int64(gen.col)
	res, err := cdp.Call(ctx, conn, cdpdebugger.SetBreakpointByURL, cdpdebugger.SetBreakpointByURLParams{
		LineNumber: int64(gen.line - 1), URL: sc.url, ColumnNumber: &col, Condition: bp.cond})
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	bp.cdpIDs = append(bp.cdpIDs, res.BreakpointID)
	d.byCDP[res.BreakpointID] = bp
	if len(res.Locations) > 0 {
		bp.verified, bp.pending, bp.message = true, false, ""
		bp.actual = line
		if p, l, ok := sm.original(int(res.Locations[0].LineNumber)+1, int(derefCol(res.Locations[0].ColumnNumber))); ok && p == bp.path {
			bp.actual = l
		}
	}
	return nil
}

func derefCol(c *int64) int64 {
	if c == nil {
		return 0
	}
	return *c
}

// scriptsMapping lists the loaded scripts whose source map names path.
func (d *debugger) scriptsMapping(path string) []*script {
	d.mu.Lock()
	var cands []*script
	if d.sourceMap {
		for _, sc := range d.scripts {
			if sc.mapURL != "" && sc.path != "" {
				cands = append(cands, sc)
			}
		}
	}
	d.mu.Unlock()
	var out []*script
	for _, sc := range cands {
		if sm := d.mapOf(sc); sm != nil && sm.has(path) {
			out = append(out, sc)
		}
	}
	return out
}

// mapOf loads sc's source map once (nil if it has none or it cannot be
// read: the script is then debugged as it is).
func (d *debugger) mapOf(sc *script) *sourceMap {
	d.mu.Lock()
	if sc.smTried || !d.sourceMap || sc.mapURL == "" {
		sm := sc.sm
		d.mu.Unlock()
		return sm
	}
	d.mu.Unlock()
	sm, err := loadSourceMap(sc.url, sc.mapURL)
	d.mu.Lock()
	defer d.mu.Unlock()
	sc.smTried = true
	if err == nil {
		sc.sm = sm
	}
	return sc.sm
}

// afterInstrumentation binds the pending breakpoints of a script about to
// run (V8 paused before it because it has a source map), then resumes.
func (d *debugger) afterInstrumentation(ctx context.Context, data jsonv2.Value) {
	var ev struct {
		ScriptID cdp.ScriptID `json:"scriptId"`
	}
	_ = decode(data, &ev)
	d.mu.Lock()
	sc := d.scripts[ev.ScriptID]
	d.mu.Unlock()
	d.bindPending(ctx, sc)
	if conn, err := d.live(); err == nil {
		_, _ = cdp.Call(ctx, conn, cdpdebugger.Resume, cdpdebugger.ResumeParams{})
	}
}

// pendingLocked lists the breakpoints waiting for a script compiled from
// their file.
func (d *debugger) pendingLocked() []*breakpoint {
	var pending []*breakpoint
	for _, list := range d.files {
		for _, bp := range list {
			if bp.pending {
				pending = append(pending, bp)
			}
		}
	}
	return pending
}

// bindPending binds the pending breakpoints whose file sc's source map
// names, telling the client of each that bound.
func (d *debugger) bindPending(ctx context.Context, sc *script) {
	conn, err := d.live()
	if err != nil || sc == nil {
		return
	}
	d.mu.Lock()
	pending := d.pendingLocked()
	d.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	sm := d.mapOf(sc)
	if sm == nil {
		return
	}
	for _, bp := range pending {
		if !sm.has(bp.path) || d.bindMapped(ctx, conn, bp, sc) != nil {
			continue
		}
		d.mu.Lock()
		bound, out := bp.verified, bp.dap()
		d.mu.Unlock()
		if bound {
			d.s.event("breakpoint", godap.BreakpointEventBody{Reason: "changed", Breakpoint: out})
		}
	}
}

// breakpointResolved: V8 bound a breakpoint in a script that loaded.
func (d *debugger) breakpointResolved(id cdpdebugger.BreakpointID, loc *cdpdebugger.Location) {
	d.mu.Lock()
	bp := d.byCDP[id]
	sc := d.scripts[loc.ScriptID]
	if bp == nil {
		d.mu.Unlock()
		return
	}
	bp.verified, bp.message = true, ""
	line := int(loc.LineNumber) + 1
	d.mu.Unlock()
	if bp.mapped && sc != nil {
		if sm := d.mapOf(sc); sm != nil {
			if p, l, ok := sm.original(line, int(derefCol(loc.ColumnNumber))); ok && p == bp.path {
				line = l
			}
		}
	}
	d.mu.Lock()
	bp.actual = line
	out := bp.dap()
	d.mu.Unlock()
	d.s.event("breakpoint", godap.BreakpointEventBody{Reason: "changed", Breakpoint: out})
}

// setExceptionBreakpoints: "all" pauses on every exception, "uncaught" on
// those nothing catches.
func (d *debugger) setExceptionBreakpoints(ctx context.Context, filters []string) error {
	conn, err := d.live()
	if err != nil {
		return err
	}
	state := cdpdebugger.SetPauseOnExceptionsStateNone
	for _, f := range filters {
		switch f {
		case "all":
			state = cdpdebugger.SetPauseOnExceptionsStateAll
		case "uncaught":
			if state == cdpdebugger.SetPauseOnExceptionsStateNone {
				state = cdpdebugger.SetPauseOnExceptionsStateUncaught
			}
		default:
			return fmt.Errorf("unknown exception filter %q (have all, uncaught)", f)
		}
	}
	_, err = cdp.Call(ctx, conn, cdpdebugger.SetPauseOnExceptions, cdpdebugger.SetPauseOnExceptionsParams{State: state})
	return err
}

// urlRegex matches a script by its path, as a file:// URL (how node 20
// names both module kinds) or as the bare path (older CommonJS).
func urlRegex(path string) string {
	return "^(?:" + regexp.QuoteMeta(pathToURL(path)) + "|" + regexp.QuoteMeta(path) + ")$"
}

// compileCondition joins a condition and a logpoint message into one V8
// condition: the message is logged (when the condition holds) and the
// result is false, so a logpoint never stops.
func compileCondition(cond, logMsg string) string {
	if logMsg == "" {
		return cond
	}
	logged := "(console.log(" + logExpression(logMsg) + "), false)"
	if cond == "" {
		return logged
	}
	return "(" + cond + ") && " + logged
}

// logExpression turns "total={total}" into a JavaScript string expression,
// each {expr} interpolated (braces inside expressions nest).
func logExpression(msg string) string {
	var parts []string
	lit := strings.Builder{}
	flush := func() {
		if lit.Len() > 0 {
			b, _ := json.Marshal(lit.String())
			parts = append(parts, string(b))
			lit.Reset()
		}
	}
	for i := 0; i < len(msg); i++ {
		if msg[i] != '{' {
			lit.WriteByte(msg[i])
			continue
		}
		depth, j := 0, i
		for ; j < len(msg); j++ {
			if msg[j] == '{' {
				depth++
			} else if msg[j] == '}' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if j == len(msg) { // unclosed: literal
			lit.WriteString(msg[i:])
			break
		}
		flush()
		parts = append(parts, "String(("+msg[i+1:j]+"))")
		i = j
	}
	flush()
	if len(parts) == 0 {
		return `""`
	}
	return strings.Join(parts, " + ")
}

// hitCondition is a DAP hit condition: "N" or ">= N" (stop from the Nth
// hit on, as lldb-dap does), "> N", "== N" (only the Nth), "< N", "<= N",
// "% N" (every Nth). The zero value always stops.
type hitCondition struct {
	op string
	n  int
}

var hitRe = regexp.MustCompile(`^\s*(>=|<=|===|==|>|<|%)?\s*(\d+)\s*$`)

func parseHitCondition(s string) (hitCondition, error) {
	if strings.TrimSpace(s) == "" {
		return hitCondition{}, nil
	}
	m := hitRe.FindStringSubmatch(s)
	if m == nil {
		return hitCondition{}, fmt.Errorf("hit condition %q is not a count (N, >= N, > N, == N, < N, <= N or %% N)", s)
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || (m[1] == "%" && n == 0) {
		return hitCondition{}, fmt.Errorf("hit condition %q: bad count", s)
	}
	op := m[1]
	if op == "" {
		op = ">="
	}
	return hitCondition{op: op, n: n}, nil
}

func (h hitCondition) met(hits int) bool {
	switch h.op {
	case "":
		return true
	case ">=":
		return hits >= h.n
	case ">":
		return hits > h.n
	case "==", "===":
		return hits == h.n
	case "<":
		return hits < h.n
	case "<=":
		return hits <= h.n
	case "%":
		return hits%h.n == 0
	}
	return true
}
