//go:build !windows

package dap

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// Exceptions in the stop. A stop for an exception, a panic or a signal
// carries what was thrown (StopInfo.Exception): its type and message and,
// where the adapter gives it, the stack of the throw, from DAP's
// exceptionInfo request. It is asked for when a stop is reported (snapshot,
// the steps' and continue's answers), not on the read goroutine that
// received the stopped event (which must never wait for a response), and
// kept on the stop so it is asked once.

// exceptionInfoWait bounds the exceptionInfo request: a stop is answered
// without its details rather than late.
const exceptionInfoWait = 3 * time.Second

// Bounds of an exception's stack text.
const (
	exceptionStackLines = 40
	exceptionStackBytes = 4 << 10
)

// exceptionDescriber is an adapter whose exceptionInfo leaves out what it
// could find itself: describeException completes ex (already filled from
// exceptionInfo and the stop) for the stop st, asking on c.
type exceptionDescriber interface {
	describeException(ctx context.Context, s *Session, c *Client, st *StopInfo, ex *ExceptionInfo)
}

var signalName = regexp.MustCompile(`\bSIG[A-Z0-9]+\b`)

// exceptional reports whether st is a stop for something thrown: DAP's
// "exception" (debugpy, lldb-dap's signals, delve's panics, node), or the
// reasons some adapters use for the same.
func exceptional(st *StopInfo) bool {
	switch st.Reason {
	case "exception", "panic", "signal", "fatal error":
		return true
	}
	return false
}

// withException returns st with its Exception filled in when st is a stop
// for something thrown, asking the adapter (on c, for st's thread) once;
// the session's stop is updated too, so later reports carry it. A failed or
// unsupported exceptionInfo leaves the stop's own description and text.
func (s *Session) withException(ctx context.Context, c *Client, st *StopInfo) *StopInfo {
	if st == nil || st.Exception != nil || !exceptional(st) {
		return st
	}
	ex := &ExceptionInfo{Type: st.Description, Message: strings.Trim(st.Text, `"`)}
	if s.supports("supportsExceptionInfoRequest") {
		var body struct {
			ExceptionID string `json:"exceptionId"`
			Description string `json:"description"`
			BreakMode   string `json:"breakMode"`
			Details     *struct {
				Message    string `json:"message"`
				TypeName   string `json:"typeName"`
				StackTrace string `json:"stackTrace"`
			} `json:"details"`
		}
		ictx, cancel := context.WithTimeout(ctx, boundBy(ctx, exceptionInfoWait))
		err := c.Do(ictx, "exceptionInfo", map[string]any{"threadId": st.ThreadID}, &body)
		cancel()
		if err == nil {
			if body.ExceptionID != "" {
				ex.Type = body.ExceptionID
			}
			if body.Description != "" {
				ex.Message = body.Description
			}
			ex.BreakMode = body.BreakMode
			if d := body.Details; d != nil {
				if d.TypeName != "" && ex.Type == "" {
					ex.Type = d.TypeName
				}
				if d.Message != "" && ex.Message == "" {
					ex.Message = d.Message
				}
				ex.Stack = boundTail(d.StackTrace, exceptionStackLines, exceptionStackBytes)
			}
		}
	}
	if ex.Type == "" {
		ex.Type = st.Reason
	}
	if d, ok := s.adapter.(exceptionDescriber); ok {
		dctx, cancel := context.WithTimeout(ctx, boundBy(ctx, exceptionInfoWait))
		d.describeException(dctx, s, c, st, ex)
		cancel()
	}
	// delve quotes a panic's message; lldb-dap's type of every signal is
	// "signal", its name only in the message.
	if m := ex.Message; len(m) >= 2 && m[0] == '"' && m[len(m)-1] == '"' {
		ex.Message = m[1 : len(m)-1]
	}
	if sig := signalName.FindString(ex.Message); ex.Type == "signal" && sig != "" {
		ex.Type = sig
	}
	out := *st
	out.Exception = ex
	s.mu.Lock()
	if s.stop == st {
		s.stop = &out
	}
	s.mu.Unlock()
	return &out
}

// supports reports whether the adapter's capabilities set the flag name.
func (s *Session) supports(name string) bool {
	var caps map[string]any
	_ = json.Unmarshal(s.caps, &caps)
	v, _ := caps[name].(bool)
	return v
}

// exceptionFilters are the adapter's exception filters, from its
// capabilities (exceptionBreakpointFilters).
func (s *Session) exceptionFilters() []ExceptionFilter {
	return filtersOf(s.caps)
}

func filtersOf(caps json.RawMessage) []ExceptionFilter {
	var c struct {
		Filters []ExceptionFilter `json:"exceptionBreakpointFilters"`
	}
	_ = json.Unmarshal(caps, &c)
	return c.Filters
}

// checkFilters answers exception filters the adapter does not have with
// invalid_payload naming field and listing the ones it has, before any is
// sent: adapters ignore unknown filters silently, and a session asked to
// stop on exceptions that never stops would mislead.
func checkFilters(field string, asked []string, have []ExceptionFilter) error {
	for i, f := range asked {
		if !slices.ContainsFunc(have, func(h ExceptionFilter) bool { return h.Filter == f }) {
			names := make([]string, len(have))
			for j, h := range have {
				names[j] = h.Filter
			}
			if len(names) == 0 {
				return protocol.Errorf(protocol.CodeInvalidPayload, "%s[%d]: %q: this debug adapter has no exception filters", field, i, f)
			}
			return protocol.Errorf(protocol.CodeInvalidPayload, "%s[%d]: unknown exception filter %q; this debug adapter has %q", field, i, f, names)
		}
	}
	return nil
}
