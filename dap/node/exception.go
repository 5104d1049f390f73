//go:build !windows

package node

import (
	"errors"
	"strings"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	godap "github.com/google/go-dap"
)

// exceptionInfo answers DAP's exceptionInfo for the current exception
// pause: the thrown value's class (TypeError, Error) as the exception's
// id, the first line of its description (V8's "TypeError: msg") as the
// description, and the whole description, which for an Error holds V8's
// stack, as the stack trace. A thrown non-Error (throw 42) has its value.
func (d *debugger) exceptionInfo() (any, error) {
	d.mu.Lock()
	p := d.paused
	d.mu.Unlock()
	if p == nil || len(p.thrown) == 0 {
		return nil, errors.New("the program is not paused on an exception")
	}
	var ro cdpruntime.RemoteObject
	if !decode(p.thrown, &ro) {
		return nil, errors.New("the thrown value cannot be read")
	}
	id := ro.ClassName
	if id == "" {
		id = string(ro.Type)
	}
	// V8 adds "uncaught" to the thrown value of an exception pause.
	var flags struct {
		Uncaught bool `json:"uncaught"`
	}
	mode := "always"
	if decode(p.thrown, &flags) && flags.Uncaught {
		mode = "unhandled"
	}
	body := godap.ExceptionInfoResponseBody{ExceptionId: id, Description: exceptionText(p.thrown), BreakMode: godap.ExceptionBreakMode(mode)}
	if ro.Description != "" {
		_, msg, found := strings.Cut(strings.SplitN(ro.Description, "\n", 2)[0], ": ")
		if found {
			body.Description = msg
		}
		body.Details = &godap.ExceptionDetails{TypeName: id, Message: body.Description, StackTrace: ro.Description}
	}
	return body, nil
}
