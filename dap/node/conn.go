//go:build !windows

package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/coder/websocket"
)

// ErrClosed is returned by calls on a Conn whose WebSocket closed.
var ErrClosed = errors.New("node: the inspector connection closed")

// maxMessage bounds one CDP message (getScriptSource of a bundle, the
// properties of a large array).
const maxMessage = 64 << 20

// Conn is one Chrome DevTools Protocol connection to a V8 inspector over
// github.com/coder/websocket. It implements cdp.Session, so the typed
// commands of cdproto run on it (cdp.Call(ctx, conn, debugger.Resume, …)).
//
// One goroutine reads. Every event goes, in wire order, to the onEvent
// function given to Dial (on the read goroutine: it must not block on this
// Conn's calls) and to Subscribe's channels. The adapter reads onEvent,
// not Subscribe: a paused event names scripts that earlier scriptParsed
// events introduced, and separate channels per method would lose that
// order. All methods may be called concurrently; Call gives up when its
// context ends or the connection closes.
type Conn struct {
	ws      *websocket.Conn
	onEvent func(method string, params jsonv2.Value)
	record  io.Writer

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *cdproto.Message
	subs    map[string][]chan jsonv2.Value
	err     error

	recMu  sync.Mutex
	closed chan struct{}
}

var _ cdp.Session = (*Conn)(nil)

// DialOptions are the optional parts of Dial.
type DialOptions struct {
	// OnEvent receives every event in wire order, on the read goroutine.
	OnEvent func(method string, params jsonv2.Value)
	// Record, when set, receives every message in both directions as JSON
	// lines ({"dir":"send"|"recv", "msg":…}), the transcripts the unit
	// tests replay.
	Record io.Writer
}

// Dial connects to an inspector's WebSocket URL (ws://host:port/UUID).
func Dial(ctx context.Context, url string, opts DialOptions) (*Conn, error) {
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, fmt.Errorf("connecting to the inspector at %s: %w", url, err)
	}
	ws.SetReadLimit(maxMessage)
	c := &Conn{ws: ws, onEvent: opts.OnEvent, record: opts.Record, pending: map[int64]chan *cdproto.Message{},
		subs: map[string][]chan jsonv2.Value{}, closed: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// Done is closed when the connection ended.
func (c *Conn) Done() <-chan struct{} { return c.closed }

// Close closes the WebSocket and waits for the read loop to end.
func (c *Conn) Close() error {
	err := c.ws.CloseNow()
	<-c.closed
	return err
}

func (c *Conn) readLoop() {
	var err error
	defer func() {
		c.mu.Lock()
		c.err = fmt.Errorf("%w: %v", ErrClosed, err)
		pending, subs := c.pending, c.subs
		c.pending, c.subs = nil, nil
		c.mu.Unlock()
		close(c.closed)
		for _, ch := range pending {
			close(ch)
		}
		for _, list := range subs {
			for _, ch := range list {
				close(ch)
			}
		}
	}()
	for {
		var data []byte
		_, data, err = c.ws.Read(context.Background())
		if err != nil {
			return
		}
		c.trace("recv", data)
		m := new(cdproto.Message)
		if jsonv2.Unmarshal(data, m, jsonv2.AllowInvalidUTF8(true)) != nil {
			continue // nothing to correlate it with
		}
		if m.ID != 0 {
			c.mu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m // buffered 1, registered once: never blocks
			}
			continue
		}
		if c.onEvent != nil {
			c.onEvent(string(m.Method), m.Params)
		}
		c.mu.Lock()
		for _, ch := range c.subs[string(m.Method)] {
			select {
			case ch <- m.Params:
			default: // a subscriber that does not read loses events, not the connection
			}
		}
		c.mu.Unlock()
	}
}

// trace writes one message to the transcript, if recording.
func (c *Conn) trace(dir string, data []byte) {
	if c.record == nil {
		return
	}
	line, _ := json.Marshal(struct {
		Dir string          `json:"dir"`
		Msg json.RawMessage `json:"msg"`
	}{dir, json.RawMessage(data)})
	c.recMu.Lock()
	defer c.recMu.Unlock()
	_, _ = c.record.Write(append(line, '\n'))
}

// callTimeout bounds a call whose context has no deadline: an inspector
// that never answers must not hold a request forever.
const callTimeout = 30 * time.Second

// Call sends the command and waits for its response, decoding the result
// into result (if non-nil). An error the inspector answers is a *cdproto.Error.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	var raw jsonv2.Value
	if params != nil {
		b, err := jsonv2.Marshal(params)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", method, err)
		}
		raw = b
	}
	ch := make(chan *cdproto.Message, 1)
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch // registered before the write: the answer may be fast
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
	}
	msg, err := jsonv2.Marshal(&cdproto.Message{ID: id, Method: cdproto.MethodType(method), Params: raw})
	if err != nil {
		forget()
		return fmt.Errorf("encoding %s: %w", method, err)
	}
	c.trace("send", msg)
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		forget()
		return fmt.Errorf("sending %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: %w", method, c.closedErr())
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %w", method, m.Error)
		}
		if result != nil && len(m.Result) > 0 {
			if err := jsonv2.Unmarshal(m.Result, result, jsonv2.AllowInvalidUTF8(true)); err != nil {
				return fmt.Errorf("decoding %s: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("waiting for %s: %w", method, ctx.Err())
	}
}

func (c *Conn) closedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Subscribe implements cdp.Session: it buffers (up to 64) events of method
// until cancel is called or the connection closes.
func (c *Conn) Subscribe(method string) (<-chan jsonv2.Value, func()) {
	ch := make(chan jsonv2.Value, 64)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.subs == nil {
		close(ch)
		return ch, func() {}
	}
	c.subs[method] = append(c.subs[method], ch)
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			list := c.subs[method]
			for i, x := range list {
				if x == ch {
					c.subs[method] = append(list[:i], list[i+1:]...)
					close(ch)
					return
				}
			}
		})
	}
}
