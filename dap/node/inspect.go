//go:build !windows

package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	cdpdebugger "github.com/chromedp/cdproto/debugger"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	godap "github.com/google/go-dap"
)

// Inspecting a paused program: stack frames from the paused event (paths
// and lines through source maps), scopes from each frame's scope chain, and
// variables and evaluation results as Runtime remote objects. Frames,
// scopes and objects are handed out as handles valid until the program
// resumes.

// errRunning answers requests that need the program paused.
var errRunning = errors.New("the program is running")

// frameHandle and objectHandle are what handles refer to.
type frameHandle struct{ frame *cdpdebugger.CallFrame }

// objectHandle lists objects whose properties are shown together (the
// merged Local scope); a name of an earlier one hides a later one's.
type objectHandle struct{ ids []cdpruntime.RemoteObjectID }

func (d *debugger) handleLocked(h any) int {
	d.nextHandle++
	d.handles[d.nextHandle] = h
	return d.nextHandle
}

func (d *debugger) stackTrace(args godap.StackTraceArguments) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused == nil {
		return nil, errRunning
	}
	frames := d.paused.frames
	start := min(args.StartFrame, len(frames))
	end := len(frames)
	if args.Levels > 0 {
		end = min(end, start+args.Levels)
	}
	out := make([]godap.StackFrame, 0, end-start)
	for _, f := range frames[start:end] {
		sf := godap.StackFrame{Id: d.handleLocked(frameHandle{f}), Name: f.FunctionName}
		if sf.Name == "" {
			sf.Name = "(anonymous)"
		}
		path, line, col := d.locateLocked(f.Location)
		sf.Line, sf.Column = line, col
		switch {
		case path != "":
			sf.Source = &godap.Source{Name: filepath.Base(path), Path: path}
		default:
			if sc := d.scripts[f.Location.ScriptID]; sc != nil && sc.url != "" {
				sf.Source = &godap.Source{Name: sc.url}
				sf.PresentationHint = "subtle"
			}
		}
		out = append(out, sf)
	}
	return godap.StackTraceResponseBody{StackFrames: out, TotalFrames: len(frames)}, nil
}

// locateLocked maps a CDP location (0-based) to a path and 1-based line
// and column, through the script's source map when it has one that is
// loaded (mapOf loads it; here only loaded maps are used, as d.mu is held).
func (d *debugger) locateLocked(loc *cdpdebugger.Location) (string, int, int) {
	line, col := int(loc.LineNumber)+1, int(derefCol(loc.ColumnNumber))+1
	sc := d.scripts[loc.ScriptID]
	if sc == nil {
		return "", line, col
	}
	if sc.sm != nil {
		if p, l, ok := sc.sm.original(line, col-1); ok {
			return p, l, 1
		}
	}
	return sc.path, line, col
}

// loadMapsOfPause loads the source maps of the paused frames' scripts, so
// that stackTrace (which holds d.mu) can use them.
func (d *debugger) loadMapsOfPause() {
	d.mu.Lock()
	var scripts []*script
	if d.paused != nil {
		for _, f := range d.paused.frames {
			if sc := d.scripts[f.Location.ScriptID]; sc != nil && !sc.smTried && sc.mapURL != "" {
				scripts = append(scripts, sc)
			}
		}
	}
	d.mu.Unlock()
	for _, sc := range scripts {
		d.mapOf(sc)
	}
}

var scopeNames = map[cdpdebugger.ScopeType]string{
	cdpdebugger.ScopeTypeLocal: "Local", cdpdebugger.ScopeTypeClosure: "Closure", cdpdebugger.ScopeTypeBlock: "Block",
	cdpdebugger.ScopeTypeScript: "Script", cdpdebugger.ScopeTypeModule: "Module", cdpdebugger.ScopeTypeGlobal: "Global",
	cdpdebugger.ScopeTypeCatch: "Catch", cdpdebugger.ScopeTypeWith: "With", cdpdebugger.ScopeTypeEval: "Eval",
}

// scopes lists a frame's scope chain. The block (and catch) scopes inside
// the function are shown merged into its Local scope, innermost first, as
// one list of the names in reach: a snapshot's locals are then the
// parameters and every local variable, wherever in the function it was
// declared.
func (d *debugger) scopes(frameID int) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused == nil {
		return nil, errRunning
	}
	fh, ok := d.handles[frameID].(frameHandle)
	if !ok {
		return nil, fmt.Errorf("no frame %d in this pause", frameID)
	}
	chain := fh.frame.ScopeChain
	local := -1
	for i, sc := range chain {
		if sc.Type == cdpdebugger.ScopeTypeLocal {
			local = i
			break
		}
		if sc.Type != cdpdebugger.ScopeTypeBlock && sc.Type != cdpdebugger.ScopeTypeCatch {
			break
		}
	}
	out := make([]godap.Scope, 0, len(chain))
	if local >= 0 {
		var ids []cdpruntime.RemoteObjectID
		for _, sc := range chain[:local+1] {
			if sc.Object != nil && sc.Object.ObjectID != "" {
				ids = append(ids, sc.Object.ObjectID)
			}
		}
		out = append(out, godap.Scope{Name: "Local", PresentationHint: "locals", VariablesReference: d.handleLocked(objectHandle{ids})})
		chain = chain[local+1:]
	}
	for _, sc := range chain {
		name := scopeNames[sc.Type]
		if name == "" {
			name = string(sc.Type)
		}
		if sc.Name != "" {
			name += " (" + sc.Name + ")"
		}
		s := godap.Scope{Name: name, Expensive: sc.Type == cdpdebugger.ScopeTypeGlobal}
		if sc.Object != nil && sc.Object.ObjectID != "" {
			s.VariablesReference = d.handleLocked(objectHandle{[]cdpruntime.RemoteObjectID{sc.Object.ObjectID}})
		}
		out = append(out, s)
	}
	return godap.ScopesResponseBody{Scopes: out}, nil
}

func (d *debugger) variables(ctx context.Context, ref int) (any, error) {
	conn, err := d.live()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	oh, ok := d.handles[ref].(objectHandle)
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no variables reference %d in this pause", ref)
	}
	own := true
	var props []*cdpruntime.PropertyDescriptor
	seen := map[string]bool{}
	for _, id := range oh.ids {
		res, err := cdp.Call(ctx, conn, cdpruntime.GetProperties, cdpruntime.GetPropertiesParams{ObjectID: id, OwnProperties: &own})
		if err != nil {
			return nil, err
		}
		for _, p := range res.Result {
			if p.Name == "__proto__" || p.Value == nil || seen[p.Name] {
				continue
			}
			seen[p.Name] = true
			props = append(props, p)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]godap.Variable, 0, len(props))
	for _, p := range props {
		out = append(out, d.variableLocked(p.Name, p.Value))
	}
	return godap.VariablesResponseBody{Variables: out}, nil
}

func (d *debugger) variableLocked(name string, v *cdpruntime.RemoteObject) godap.Variable {
	out := godap.Variable{Name: name, Value: formatValue(v), Type: typeName(v)}
	if v.ObjectID != "" && v.Subtype != cdpruntime.RemoteObjectSubtypeNull {
		out.VariablesReference = d.handleLocked(objectHandle{[]cdpruntime.RemoteObjectID{v.ObjectID}})
	}
	return out
}

// evaluate runs an expression in a frame of the pause (the top one by
// default), or globally while the program runs.
func (d *debugger) evaluate(ctx context.Context, args godap.EvaluateArguments) (any, error) {
	conn, err := d.live()
	if err != nil {
		return nil, err
	}
	silent := args.Context != "repl"
	d.mu.Lock()
	var frame *cdpdebugger.CallFrame
	if d.paused != nil {
		if fh, ok := d.handles[args.FrameId].(frameHandle); ok {
			frame = fh.frame
		} else if len(d.paused.frames) > 0 {
			frame = d.paused.frames[0]
		}
	}
	contextID := d.contextID
	d.mu.Unlock()
	var result *cdpruntime.RemoteObject
	var exc *cdpruntime.ExceptionDetails
	if frame != nil {
		res, err := cdp.Call(ctx, conn, cdpdebugger.EvaluateOnCallFrame, cdpdebugger.EvaluateOnCallFrameParams{
			CallFrameID: frame.CallFrameID, Expression: args.Expression, Silent: &silent})
		if err != nil {
			return nil, err
		}
		result, exc = res.Result, res.ExceptionDetails
	} else {
		res, err := cdp.Call(ctx, conn, cdpruntime.Evaluate, cdpruntime.EvaluateParams{
			Expression: args.Expression, Silent: &silent, ContextID: contextID})
		if err != nil {
			return nil, err
		}
		result, exc = res.Result, res.ExceptionDetails
	}
	if exc != nil {
		msg := exc.Text
		if exc.Exception != nil && exc.Exception.Description != "" {
			msg, _, _ = strings.Cut(exc.Exception.Description, "\n")
		}
		return nil, errors.New(msg)
	}
	if result == nil {
		return nil, errors.New("no result")
	}
	d.mu.Lock()
	v := d.variableLocked("", result)
	d.mu.Unlock()
	return godap.EvaluateResponseBody{Result: v.Value, Type: v.Type, VariablesReference: v.VariablesReference}, nil
}

// formatValue renders a remote object the way a debugger console shows it:
// strings quoted, numbers and the like as they are, objects by their
// description (Array(3), Map(2), Error: …), functions by their signature.
func formatValue(v *cdpruntime.RemoteObject) string {
	switch v.Type {
	case cdpruntime.RemoteObjectTypeUndefined:
		return "undefined"
	case cdpruntime.RemoteObjectTypeString:
		var s string
		if json.Unmarshal(v.Value, &s) == nil {
			return strconv.Quote(s)
		}
	case cdpruntime.RemoteObjectTypeFunction:
		sig, _, _ := strings.Cut(v.Description, "{")
		return "ƒ " + strings.TrimPrefix(strings.TrimSpace(sig), "function ")
	case cdpruntime.RemoteObjectTypeObject:
		if v.Subtype == cdpruntime.RemoteObjectSubtypeNull {
			return "null"
		}
		first, _, _ := strings.Cut(v.Description, "\n")
		return first
	}
	if v.UnserializableValue != "" {
		return string(v.UnserializableValue)
	}
	if v.Description != "" {
		return v.Description
	}
	if len(v.Value) > 0 {
		return string(v.Value)
	}
	return string(v.Type)
}

func typeName(v *cdpruntime.RemoteObject) string {
	if v.Type == cdpruntime.RemoteObjectTypeObject && v.ClassName != "" && v.Subtype != cdpruntime.RemoteObjectSubtypeNull {
		return v.ClassName
	}
	return string(v.Type)
}
