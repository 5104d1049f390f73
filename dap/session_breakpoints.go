//go:build !windows

package dap

import (
	"context"

	"github.com/tetherdev/tether/protocol"
)

// Breakpoints of a session: kept per file (DAP replaces a file's whole set
// on every request) and updated by the adapter's breakpoint events.

type dapBreakpoint struct {
	ID       int    `json:"id"`
	Verified bool   `json:"verified"`
	Line     int    `json:"line"`
	Message  string `json:"message"`
	Source   *struct {
		Path string `json:"path"`
	} `json:"source"`
}

func (b dapBreakpoint) toBreakpoint(path string) Breakpoint {
	if b.Source != nil && b.Source.Path != "" {
		path = b.Source.Path
	}
	return Breakpoint{ID: b.ID, Verified: b.Verified, Line: b.Line, Path: path, Message: b.Message}
}

func (s *Session) updateBreakpoint(nb Breakpoint) {
	nb.Path = s.paths.local(nb.Path)
	s.mu.Lock()
	defer s.mu.Unlock()
	for path, list := range s.files {
		for i := range list {
			if list[i].ID == nb.ID {
				if nb.Path == "" {
					nb.Path = path
				}
				if nb.Line == 0 {
					nb.Line = list[i].Line
				}
				list[i] = nb
				return
			}
		}
	}
	for i := range s.funcs {
		if s.funcs[i].ID == nb.ID {
			nb.Function = s.funcs[i].Function
			s.funcs[i] = nb
			return
		}
	}
}

func (s *Session) setFileBreakpoints(ctx context.Context, c *Client, path string, bps []SourceBreakpoint) ([]Breakpoint, error) {
	bps, err := resolveLines(s.root, path, "breakpoints", bps)
	if err != nil {
		return nil, err
	}
	path = absIn(s.root, path)
	list := make([]map[string]any, 0, len(bps))
	for _, b := range bps {
		m := map[string]any{"line": b.Line}
		if b.Column > 0 {
			m["column"] = b.Column
		}
		if b.Condition != "" {
			m["condition"] = b.Condition
		}
		if b.HitCondition != "" {
			m["hitCondition"] = b.HitCondition
		}
		if b.LogMessage != "" {
			m["logMessage"] = b.LogMessage
		}
		list = append(list, m)
	}
	var body struct {
		Breakpoints []dapBreakpoint `json:"breakpoints"`
	}
	args := map[string]any{"source": map[string]any{"path": s.paths.remote(path)}, "breakpoints": list, "sourceModified": false}
	if err := c.Do(ctx, "setBreakpoints", args, &body); err != nil {
		return nil, s.adapterError(err)
	}
	out := make([]Breakpoint, len(body.Breakpoints))
	for i, b := range body.Breakpoints {
		out[i] = b.toBreakpoint(path)
		if b.Source != nil && b.Source.Path != "" {
			out[i].Path = s.paths.local(b.Source.Path)
		}
		if out[i].Line == 0 && i < len(bps) {
			out[i].Line = bps[i].Line
		}
	}
	s.mu.Lock()
	if len(out) == 0 {
		delete(s.files, path)
		delete(s.askedFiles, path)
	} else {
		s.files[path] = out
		s.askedFiles[path] = bps
	}
	s.mu.Unlock()
	return out, nil
}

func (s *Session) setFunctionBreakpoints(ctx context.Context, c *Client, fbs []FunctionBreakpoint) ([]Breakpoint, error) {
	list := make([]map[string]any, 0, len(fbs))
	for _, f := range fbs {
		m := map[string]any{"name": f.Name}
		if f.Condition != "" {
			m["condition"] = f.Condition
		}
		if f.HitCondition != "" {
			m["hitCondition"] = f.HitCondition
		}
		list = append(list, m)
	}
	var body struct {
		Breakpoints []dapBreakpoint `json:"breakpoints"`
	}
	if err := c.Do(ctx, "setFunctionBreakpoints", map[string]any{"breakpoints": list}, &body); err != nil {
		return nil, s.adapterError(err)
	}
	out := make([]Breakpoint, len(body.Breakpoints))
	for i, b := range body.Breakpoints {
		out[i] = b.toBreakpoint("")
		if i < len(fbs) {
			out[i].Function = fbs[i].Name
		}
	}
	s.mu.Lock()
	s.funcs, s.askedFuncs = out, fbs
	s.mu.Unlock()
	return out, nil
}

func (s *Session) setExceptionFilters(ctx context.Context, c *Client, filters []string) error {
	if filters == nil {
		filters = []string{}
	}
	if err := c.Do(ctx, "setExceptionBreakpoints", map[string]any{"filters": filters}, nil); err != nil {
		return s.adapterError(err)
	}
	s.mu.Lock()
	s.askedFilters = filters
	s.mu.Unlock()
	return nil
}

// SetBreakpoints replaces a file's breakpoints (and, when given, the
// function breakpoints and exception filters). It works before the program
// runs, while it is stopped and while it runs.
func (s *Session) SetBreakpoints(ctx context.Context, req SetBreakpointsRequest) (*SetBreakpointsResult, error) {
	c, err := s.live()
	if err != nil {
		return nil, err
	}
	if req.Path == "" && req.Functions == nil && req.ExceptionFilters == nil {
		return nil, protocol.Errorf(protocol.CodeInvalidPayload, "give path with breakpoints, function_breakpoints or exception_filters")
	}
	if err := checkFilters("exception_filters", req.ExceptionFilters, s.exceptionFilters()); err != nil {
		return nil, err
	}
	res := &SetBreakpointsResult{Breakpoints: []Breakpoint{}}
	if req.Path != "" {
		if res.Breakpoints, err = s.setFileBreakpoints(ctx, c, req.Path, req.Breakpoints); err != nil {
			return nil, err
		}
	}
	if req.Functions != nil {
		if res.FunctionBreakpoints, err = s.setFunctionBreakpoints(ctx, c, req.Functions); err != nil {
			return nil, err
		}
	}
	if req.ExceptionFilters != nil {
		if err := s.setExceptionFilters(ctx, c, req.ExceptionFilters); err != nil {
			return nil, err
		}
	}
	return res, nil
}
