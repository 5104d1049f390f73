//go:build !windows

package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"sync"

	godap "github.com/google/go-dap"
)

// Options configure one adapter served by Serve.
type Options struct {
	// Node is the node executable launches start (runtimeExecutable in a
	// launch configuration overrides it).
	Node string
	// Dir is the working directory of a launch without cwd.
	Dir string
	// Environ is the environment of launched programs (a launch's env is
	// added to it).
	Environ []string
	// Record, when set, receives the CDP transcript (see DialOptions).
	Record io.Writer
	// Warm, when set, holds warm nodes (warm.go): a launch it can
	// reproduce takes one, and a launch it could have served leaves one
	// made for the next once this session has ended.
	Warm *Pool
}

// Serve speaks DAP on rwc as a Node.js debug adapter until rwc closes or
// fails, then ends whatever it started (a launched node and its process
// tree) and returns. One goroutine reads requests; each is handled on a
// goroutine of its own, so a request waiting on a busy debuggee (evaluate)
// never holds up another (pause, disconnect). Writes are serialised, and a
// panic in a handler is answered as a failed response.
func Serve(rwc io.ReadWriteCloser, opts Options) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{opts: opts, rwc: rwc, ctx: ctx, cancel: cancel}
	s.dbg = newDebugger(s)
	defer func() {
		cancel()
		s.handlers.Wait()
		s.dbg.shutdown(true)
		_ = rwc.Close()
		if key, ok := s.dbg.warmable(); ok {
			// After the session's node ended: the next one's start does
			// not compete with the session it would only slow down.
			opts.Warm.refill(key)
		}
	}()
	r := bufio.NewReaderSize(rwc, 64<<10)
	for {
		raw, err := godap.ReadBaseMessage(r)
		if err != nil {
			return
		}
		var env struct {
			Seq     int    `json:"seq"`
			Type    string `json:"type"`
			Command string `json:"command"`
		}
		if json.Unmarshal(raw, &env) != nil || env.Type != "request" {
			continue // responses to our (no) reverse requests, or garbage
		}
		msg, err := godap.DecodeProtocolMessage(raw)
		req := &request{seq: env.Seq, command: env.Command, raw: raw}
		if err != nil {
			s.fail(req, fmt.Sprintf("the Node adapter does not support %s (%v)", env.Command, err))
			continue
		}
		req.msg = msg
		s.handlers.Go(func() { s.handle(req) })
	}
}

// server is the DAP side of one adapter.
type server struct {
	opts   Options
	rwc    io.ReadWriteCloser
	ctx    context.Context // ends with Serve
	cancel context.CancelFunc
	dbg    *debugger

	handlers sync.WaitGroup
	wmu      sync.Mutex // serialises writes and seq
	seq      int
}

type request struct {
	seq     int
	command string
	raw     json.RawMessage
	msg     godap.Message
}

// handle runs one request and answers it exactly once.
func (s *server) handle(req *request) {
	defer func() {
		if p := recover(); p != nil {
			s.fail(req, fmt.Sprintf("internal error in the Node adapter handling %s: %v\n%s", req.command, p, debug.Stack()))
		}
	}()
	body, err := s.dbg.dispatch(s.ctx, req)
	if err != nil {
		s.fail(req, err.Error())
		return
	}
	s.respond(req, body)
}

type envelope struct {
	Seq        int    `json:"seq"`
	Type       string `json:"type"`
	RequestSeq int    `json:"request_seq,omitempty"`
	Success    *bool  `json:"success,omitempty"`
	Command    string `json:"command,omitempty"`
	Event      string `json:"event,omitempty"`
	Message    string `json:"message,omitempty"`
	Body       any    `json:"body,omitempty"`
}

func (s *server) respond(req *request, body any) {
	ok := true
	s.write(&envelope{Type: "response", RequestSeq: req.seq, Success: &ok, Command: req.command, Body: body})
}

func (s *server) fail(req *request, msg string) {
	ok := false
	s.write(&envelope{Type: "response", RequestSeq: req.seq, Success: &ok, Command: req.command, Message: msg,
		Body: godap.ErrorResponseBody{Error: &godap.ErrorMessage{Id: 1, Format: msg}}})
}

// event sends a DAP event.
func (s *server) event(name string, body any) {
	s.write(&envelope{Type: "event", Event: name, Body: body})
}

func (s *server) write(m *envelope) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.seq++
	m.Seq = s.seq
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	if godap.WriteBaseMessage(s.rwc, b) != nil {
		_ = s.rwc.Close() // the client is gone: end Serve's read loop
	}
}

// output sends an output event.
func (s *server) output(category, text string) {
	s.event("output", godap.OutputEventBody{Category: category, Output: text})
}
