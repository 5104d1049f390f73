//go:build !windows

package dap

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	godap "github.com/google/go-dap"
	"go.opentelemetry.io/otel/trace"
)

// ErrClientClosed is returned by requests on a client whose connection ended.
var ErrClientClosed = errors.New("dap: connection to the debug adapter closed")

// Message is one DAP message as read from the wire. Body and Arguments stay
// raw so that adapters' custom events and unknown commands never fail the
// read loop (go-dap's decoder rejects events it does not know).
type Message struct {
	Seq        int             `json:"seq"`
	Type       string          `json:"type"`
	Command    string          `json:"command,omitempty"`
	Event      string          `json:"event,omitempty"`
	RequestSeq int             `json:"request_seq,omitempty"`
	Success    bool            `json:"success,omitempty"`
	Message    string          `json:"message,omitempty"`
	Body       json.RawMessage `json:"body,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`

	// AfterSeq is, for an event, the seq of the last request sent before
	// it arrived: an event can only be about requests up to it (a failure
	// shows the adapter's lines printed since its request, failure.go).
	AfterSeq int `json:"-"`
}

// ResponseError is a response with success false.
type ResponseError struct {
	Command string
	Message string
	Body    json.RawMessage
	Seq     int // the failed request's seq
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("%s failed: %s", e.Command, e.reason())
}

// reason is the adapter's message: its structured error's format if it
// sent one, else the response's message.
func (e *ResponseError) reason() string {
	var b struct {
		Error *godap.ErrorMessage `json:"error"`
	}
	if json.Unmarshal(e.Body, &b) == nil && b.Error != nil && b.Error.Format != "" {
		return b.Error.Format
	}
	return e.Message
}

// Client speaks DAP over one connection. One goroutine reads; writes are
// serialised by a mutex so messages never interleave. All methods may be
// called concurrently. Events are handed to the onEvent function on the read
// goroutine, in wire order; it must not block on requests of this client.
type Client struct {
	w         io.Writer
	onEvent   func(*Message)
	onRequest func(*Message) error
	adapter   string // the adapter's name, for request spans

	wmu sync.Mutex // serialises writes and seq assignment

	mu      sync.Mutex
	seq     int
	pending map[int]pending
	err     error // why the connection ended, set once

	closed chan struct{} // closed when the read loop ends
}

// NewClient starts the read loop over r and writes requests to w. The loop
// ends when r fails (EOF when the adapter exits); Done is closed then.
func NewClient(r io.Reader, w io.Writer, onEvent func(*Message)) *Client {
	return newClient(r, w, handlers{event: onEvent})
}

// handlers are what the owner of a Client does with the adapter's events
// and reverse requests. Both run on the read goroutine and must not block
// on the Client's requests.
type handlers struct {
	event func(*Message)
	// request answers a reverse request: nil is success, an error its
	// failure. Without it every reverse request is declined.
	request func(*Message) error
	// adapter names the adapter (Adapter.Name) in request spans.
	adapter string
}

// pending is a request awaiting its response: where the response goes, and
// the request's span (nil when tracing is off), which the response ends.
type pending struct {
	ch   chan *Message
	span trace.Span
}

func newClient(r io.Reader, w io.Writer, h handlers) *Client {
	c := &Client{w: w, onEvent: h.event, onRequest: h.request, adapter: h.adapter, pending: map[int]pending{}, closed: make(chan struct{})}
	go c.readLoop(bufio.NewReaderSize(r, 64<<10))
	return c
}

// Done is closed when the connection ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.closed }

// Err returns why the connection ended, or nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) readLoop(r *bufio.Reader) {
	var err error
	defer func() {
		c.mu.Lock()
		if err == nil || errors.Is(err, io.EOF) {
			err = ErrClientClosed
		}
		c.err = err
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		// Done first: a waiter woken by its closed channel must find the
		// connection already reported ended (Session.adapterError asks).
		close(c.closed)
		for _, p := range pending {
			endRequestSpan(p.span, nil, err)
			close(p.ch) // waiters see a closed channel and report c.err
		}
	}()
	for {
		var raw []byte
		raw, err = godap.ReadBaseMessage(r)
		if err != nil {
			return
		}
		m := new(Message)
		if json.Unmarshal(raw, m) != nil {
			continue // not a message at all; nothing to correlate it with
		}
		switch m.Type {
		case "response":
			c.mu.Lock()
			p, ok := c.pending[m.RequestSeq]
			delete(c.pending, m.RequestSeq)
			c.mu.Unlock()
			if ok {
				endRequestSpan(p.span, m, nil)
				p.ch <- m // buffered 1, registered once: never blocks
			}
		case "event":
			c.mu.Lock()
			m.AfterSeq = c.seq
			c.mu.Unlock()
			if c.onEvent != nil {
				c.onEvent(m)
			}
		case "request":
			c.answerReverse(m)
		}
	}
}

// answerReverse answers a request from the adapter. tether advertises no
// runInTerminal, so unless the owner handles it (startDebugging, for
// adapters that run child sessions) a reverse request is declined; an
// unanswered one would stall some adapters.
func (c *Client) answerReverse(m *Message) {
	err := errors.New("tether does not support the reverse request " + m.Command)
	if c.onRequest != nil {
		err = c.onRequest(m)
	}
	resp := map[string]any{
		"type":        "response",
		"request_seq": m.Seq,
		"command":     m.Command,
		"success":     err == nil,
	}
	if err != nil {
		resp["message"] = err.Error()
	}
	go func() { _ = c.write(resp) }() // not on the read loop: a full pipe must not stall reads
}

func (c *Client) write(msg map[string]any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.seq++
	msg["seq"] = c.seq
	c.mu.Unlock()
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encoding %v: %w", msg["command"], err)
	}
	return godap.WriteBaseMessage(c.w, b)
}

// Send writes a request and returns a channel that receives its response
// (closed without a value if the connection ends first). Use it to send a
// request without waiting, as the launch handshake requires. When tracing
// is on, the request is a span beneath the one in ctx (trace.go), ended
// when its response comes, whoever waits for it.
//
// A write fails when the connection ends (an adapter gone closes its
// pipes), and the read loop sees that end soon after: Send waits for it,
// up to sendEndWait, so that its caller finds Done closed and answers the
// end as for any request after it, not with the write's broken pipe.
func (c *Client) Send(ctx context.Context, command string, args any) (<-chan *Message, error) {
	ch, broken, err := c.send(ctx, command, args)
	if broken {
		t := time.NewTimer(sendEndWait)
		select {
		case <-c.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return ch, err
}

// sendEndWait bounds how long Send waits for the read loop to see the end
// of a connection a write found broken.
const sendEndWait = 2 * time.Second

// send is Send but for the wait; broken reports that the write failed.
func (c *Client) send(ctx context.Context, command string, args any) (ch chan *Message, broken bool, err error) {
	ch = make(chan *Message, 1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		return nil, false, err
	}
	c.seq++
	seq := c.seq
	span := c.startRequestSpan(ctx, command, seq)
	c.pending[seq] = pending{ch: ch, span: span} // registered before the write: the response may be fast
	c.mu.Unlock()
	msg := map[string]any{"seq": seq, "type": "request", "command": command}
	if args != nil {
		msg["arguments"] = args
	}
	b, err := json.Marshal(msg)
	if err != nil {
		err = fmt.Errorf("sending %s: %w", command, err)
		c.forget(seq, err)
		return nil, false, err
	}
	if err := godap.WriteBaseMessage(c.w, b); err != nil {
		err = fmt.Errorf("sending %s: %w", command, err)
		c.forget(seq, err)
		return nil, true, err
	}
	return ch, false, nil
}

// forget drops a request that was never sent; err (why) ends its span.
func (c *Client) forget(seq int, err error) {
	c.mu.Lock()
	p, ok := c.pending[seq]
	if c.pending != nil {
		delete(c.pending, seq)
	}
	c.mu.Unlock()
	if ok {
		endRequestSpan(p.span, nil, err)
	}
}

// Await waits for a response channel from Send and decodes its body into
// body (if non-nil). A failed response is a *ResponseError.
func (c *Client) Await(ctx context.Context, command string, ch <-chan *Message, body any) error {
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: %w", command, c.Err())
		}
		if !m.Success {
			return &ResponseError{Command: command, Message: m.Message, Body: m.Body, Seq: m.RequestSeq}
		}
		if body != nil && len(m.Body) > 0 {
			if err := json.Unmarshal(m.Body, body); err != nil {
				return fmt.Errorf("decoding %s response: %w", command, err)
			}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s: %w", command, ctx.Err())
	}
}

// Do sends a request and waits for its response.
func (c *Client) Do(ctx context.Context, command string, args, body any) error {
	ch, err := c.Send(ctx, command, args)
	if err != nil {
		return err
	}
	return c.Await(ctx, command, ch, body)
}
