//go:build !windows

package node

import (
	"context"
	"regexp"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	cdpdebugger "github.com/chromedp/cdproto/debugger"
	godap "github.com/google/go-dap"
)

// Function breakpoints. CDP breaks on a function only given the function
// object, which a module-scoped function is not reachable as by name; so a
// function breakpoint is found by its declaration in the program's own
// scripts (file:// URLs outside node_modules) and set on the declaration's
// body. Scripts loaded later are searched when they are parsed, which
// binds in time for functions called after their module loaded.

func (d *debugger) setFunctionBreakpoints(ctx context.Context, args godap.SetFunctionBreakpointsArguments) (any, error) {
	conn, err := d.live()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	old := d.funcs
	d.funcs = nil
	d.mu.Unlock()
	d.remove(ctx, conn, old)
	bps := make([]*breakpoint, 0, len(args.Breakpoints))
	for _, fb := range args.Breakpoints {
		bp := d.newBreakpoint("", 0, fb.Condition, fb.HitCondition, "")
		bp.function = fb.Name
		if !bp.bad {
			bp.message = "pending: no loaded script declares " + fb.Name
		}
		bps = append(bps, bp)
	}
	d.mu.Lock()
	d.funcs = bps
	var scripts []*script
	for _, sc := range d.scripts {
		scripts = append(scripts, sc)
	}
	d.mu.Unlock()
	d.bindFunctions(ctx, scripts)
	return godap.SetFunctionBreakpointsResponseBody{Breakpoints: d.dapBreakpoints(bps)}, nil
}

func (d *debugger) hasPendingFuncsLocked() bool {
	for _, bp := range d.funcs {
		if !bp.verified && !bp.bad {
			return true
		}
	}
	return false
}

// userScript: the program's own code, not node's or a dependency's.
func userScript(sc *script) bool {
	return sc.path != "" && !strings.Contains(sc.path, "/node_modules/")
}

// bindFunctions looks for the pending function breakpoints' declarations
// in scripts and sets those it finds.
func (d *debugger) bindFunctions(ctx context.Context, scripts []*script) {
	conn, err := d.live()
	if err != nil {
		return
	}
	for _, sc := range scripts {
		if !userScript(sc) {
			continue
		}
		d.mu.Lock()
		var pending []*breakpoint
		for _, bp := range d.funcs {
			if !bp.verified && !bp.bad {
				pending = append(pending, bp)
			}
		}
		d.mu.Unlock()
		if len(pending) == 0 {
			return
		}
		src, err := cdp.Call(ctx, conn, cdpdebugger.GetScriptSource, cdpdebugger.GetScriptSourceParams{ScriptID: sc.id})
		if err != nil {
			continue
		}
		for _, bp := range pending {
			line, col, ok := findDeclaration(src.ScriptSource, bp.function)
			if !ok {
				continue
			}
			c := int64(col)
			res, err := cdp.Call(ctx, conn, cdpdebugger.SetBreakpoint, cdpdebugger.SetBreakpointParams{
				Location: &cdpdebugger.Location{ScriptID: sc.id, LineNumber: int64(line), ColumnNumber: &c}, Condition: bp.cond})
			if err != nil {
				continue
			}
			d.mu.Lock()
			bp.cdpIDs = append(bp.cdpIDs, res.BreakpointID)
			d.byCDP[res.BreakpointID] = bp
			bp.verified, bp.message, bp.path = true, "", sc.path
			bp.actual = int(res.ActualLocation.LineNumber) + 1
			out := bp.dap()
			d.mu.Unlock()
			d.s.event("breakpoint", godap.BreakpointEventBody{Reason: "changed", Breakpoint: out})
		}
	}
}

// findDeclaration finds where the body of the function called name starts
// in src (0-based line and column): a function declaration or expression,
// an arrow function or a method.
func findDeclaration(src, name string) (int, int, bool) {
	if !regexp.MustCompile(`^[\p{L}_$][\p{L}\p{N}_$]*$`).MatchString(name) {
		return 0, 0, false
	}
	n := regexp.QuoteMeta(name)
	re := regexp.MustCompile(`function\s*\*?\s*` + n + `\s*\(` +
		`|(?:^|[^\p{L}\p{N}_$.])` + n + `\s*[:=]\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*=>|[\p{L}_$][\p{L}\p{N}_$]*\s*=>)` +
		`|(?m:^\s*(?:(?:async|static|get|set)\s+)*` + n + `\s*\([^)]*\)\s*\{)`)
	loc := re.FindStringIndex(src)
	if loc == nil {
		return 0, 0, false
	}
	rest := src[loc[0]:]
	body := strings.IndexAny(rest, "{")
	if arrow := strings.Index(rest, "=>"); arrow >= 0 && (body < 0 || arrow < body) {
		body = arrow + 1
	}
	if body < 0 {
		return 0, 0, false
	}
	off := loc[0] + body + 1
	line := strings.Count(src[:off], "\n")
	col := off - (strings.LastIndexByte(src[:off], '\n') + 1)
	return line, col, true
}
