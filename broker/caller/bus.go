package caller

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/protocol"
)

// DefaultGrace is how long past a call's deadline a Bus caller waits for the
// owner's answer before answering timeout itself (the owner died, or the bus
// lost the reply).
const DefaultGrace = 500 * time.Millisecond

// BusOptions configure a Bus caller.
type BusOptions struct {
	// Grace past the deadline; zero means DefaultGrace.
	Grace  time.Duration
	Logger zerolog.Logger
	// OnUnmatched is called for each reply that found no waiter (it came
	// after the caller gave up). Optional; for metrics.
	OnUnmatched func()
}

// Bus is a caller on a bus.Bus: one inbox subscription serves every call of
// the process, waiters are registered before publishing and removed exactly
// once (reply, deadline, cancel, close). All methods are safe for concurrent
// use.
type Bus struct {
	bus   bus.Bus
	inbox string
	opts  BusOptions
	sub   bus.Subscription
	onSub bus.Subscription

	mu      sync.Mutex
	waiters map[string]chan protocol.ToolResponse
	// online wakes calls that wait for their workspace to be served.
	online map[string][]chan struct{}
	closed bool
	done   chan struct{}

	unmatched atomic.Int64
}

// NewBus subscribes a fresh inbox on b and returns a caller. Close releases
// it; b stays open.
func NewBus(ctx context.Context, b bus.Bus, opts BusOptions) (*Bus, error) {
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	c := &Bus{
		bus:     b,
		inbox:   "inbox:" + uuid.NewString(),
		opts:    opts,
		waiters: make(map[string]chan protocol.ToolResponse),
		online:  make(map[string][]chan struct{}),
		done:    make(chan struct{}),
	}
	sub, err := b.Subscribe(ctx, c.inbox, c.onReply)
	if err != nil {
		return nil, fmt.Errorf("subscribing caller inbox: %w", err)
	}
	c.sub = sub
	onSub, err := b.Subscribe(ctx, protocol.OnlineChannel, c.onOnline)
	if err != nil {
		_ = sub.Unsubscribe(ctx)
		return nil, fmt.Errorf("subscribing online announcements: %w", err)
	}
	c.onSub = onSub
	return c, nil
}

// Inbox returns the channel this caller receives replies on.
func (c *Bus) Inbox() string { return c.inbox }

// Pending returns the number of registered waiters (for leak tests).
func (c *Bus) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// Unmatched returns how many replies arrived for no waiter.
func (c *Bus) Unmatched() int64 { return c.unmatched.Load() }

func (c *Bus) onReply(msg []byte) {
	var resp protocol.ToolResponse
	if err := json.Unmarshal(msg, &resp); err != nil {
		c.opts.Logger.Warn().Err(err).Msg("undecodable reply on caller inbox")
		return
	}
	c.mu.Lock()
	ch, ok := c.waiters[resp.CorrelationID]
	delete(c.waiters, resp.CorrelationID)
	c.mu.Unlock()
	if !ok {
		c.unmatched.Add(1)
		if c.opts.OnUnmatched != nil {
			c.opts.OnUnmatched()
		}
		return
	}
	ch <- resp // buffered 1, and this is the only send: never blocks
}

func (c *Bus) onOnline(msg []byte) {
	ws := string(msg)
	c.mu.Lock()
	chans := c.online[ws]
	delete(c.online, ws)
	c.mu.Unlock()
	for _, ch := range chans {
		close(ch)
	}
}

// Call implements Caller.
func (c *Bus) Call(ctx context.Context, req Request) protocol.ToolResponse {
	cid := req.CorrelationID
	if cid == "" {
		cid = uuid.NewString()
	}
	timeout := req.timeout()
	deadline := time.Now().Add(timeout)
	call := protocol.BusMessage{ToolCall: protocol.ToolCall{
		CorrelationID: cid,
		Endpoint:      req.Endpoint,
		Payload:       req.Payload,
		Timeout:       timeout.Seconds(),
		ReplyTo:       c.inbox,
		DeadlineMS:    deadline.UnixMilli(),
	}}
	if err := call.Validate(); err != nil {
		return protocol.FailureFrom(cid, err, protocol.CodeInvalidRequest)
	}
	if req.WaitForWorkspace {
		call.WaitForWorkspaceMS = timeout.Milliseconds()
	}
	msg, err := json.Marshal(call)
	if err != nil {
		return protocol.Failure(cid, protocol.CodeInvalidRequest, "encoding call: "+err.Error())
	}
	log := func(e *zerolog.Event) *zerolog.Event {
		return e.Str("correlation_id", cid).Str("endpoint", req.Endpoint).Str("workspace_id", req.WorkspaceID)
	}

	ch := make(chan protocol.ToolResponse, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return protocol.Failure(cid, protocol.CodeCallerClosed, "caller is closed")
	}
	if _, dup := c.waiters[cid]; dup {
		c.mu.Unlock()
		return protocol.Failure(cid, protocol.CodeInvalidRequest, "correlation_id already in flight")
	}
	c.waiters[cid] = ch
	c.mu.Unlock()

	// The deadline timer is the caller's own: it answers even if the owner
	// instance dies or the bus loses the reply.
	timer := time.NewTimer(time.Until(deadline) + c.opts.Grace)
	defer timer.Stop()

	channel := protocol.WorkspaceChannel(req.WorkspaceID)
	for {
		var wake chan struct{}
		if req.WaitForWorkspace {
			// Registered before publishing, so an announcement between the
			// publish and the wait is not missed.
			wake = c.waitOnline(req.WorkspaceID)
		}
		n, err := c.bus.Publish(ctx, channel, msg)
		if err != nil {
			c.forget(cid)
			c.dropOnline(req.WorkspaceID, wake)
			if dl, ok := ctx.Deadline(); ctx.Err() != nil || (ok && !time.Now().Before(dl)) {
				// The caller gave up while publishing (a socket deadline
				// from ctx may fire a moment before ctx does); the call
				// may have gone out all the same.
				c.cancelRemote(req.WorkspaceID, cid, "caller gone")
				return protocol.Failure(cid, protocol.CodeCancelled, "caller gave up while publishing: "+err.Error())
			}
			log(c.opts.Logger.Warn()).Err(err).Msg("publishing call failed")
			return protocol.Failure(cid, protocol.CodeBusUnavailable, "publishing call: "+err.Error())
		}
		if n > 0 {
			c.dropOnline(req.WorkspaceID, wake)
			log(c.opts.Logger.Debug()).Msg("call routed")
			break
		}
		if !req.WaitForWorkspace {
			c.forget(cid)
			log(c.opts.Logger.Debug()).Msg("workspace offline")
			return protocol.Failure(cid, protocol.CodeWorkspaceOffline, fmt.Sprintf("no client serves workspace %q", req.WorkspaceID))
		}
		log(c.opts.Logger.Debug()).Msg("waiting for workspace")
		select {
		case <-wake:
			// Publish takes ownership of msg; keep our own copy for retries.
			msg = append([]byte(nil), msg...)
			continue
		case <-time.After(time.Until(deadline)):
			c.dropOnline(req.WorkspaceID, wake)
			c.forget(cid)
			return protocol.Failure(cid, protocol.CodeWorkspaceOffline, fmt.Sprintf("no client served workspace %q before the deadline", req.WorkspaceID))
		case <-ctx.Done():
			c.dropOnline(req.WorkspaceID, wake)
			c.forget(cid)
			return protocol.Failure(cid, protocol.CodeCancelled, "caller gave up: "+ctx.Err().Error())
		case <-c.done:
			c.forget(cid)
			return protocol.Failure(cid, protocol.CodeCallerClosed, "caller closed")
		}
	}

	select {
	case resp := <-ch:
		return resp
	case <-timer.C:
		if resp, ok := c.giveUp(cid, ch); ok {
			return resp
		}
		log(c.opts.Logger.Warn()).Msg("no answer from the owner by the deadline; answering timeout")
		return protocol.Failure(cid, protocol.CodeTimeout, fmt.Sprintf("no answer within %s", timeout))
	case <-ctx.Done():
		if resp, ok := c.giveUp(cid, ch); ok {
			return resp
		}
		c.cancelRemote(req.WorkspaceID, cid, "caller gone")
		return protocol.Failure(cid, protocol.CodeCancelled, "caller gave up: "+ctx.Err().Error())
	case <-c.done:
		if resp, ok := c.giveUp(cid, ch); ok {
			return resp
		}
		return protocol.Failure(cid, protocol.CodeCallerClosed, "caller closed")
	}
}

// giveUp removes the waiter; a reply that raced in wins.
func (c *Bus) giveUp(cid string, ch chan protocol.ToolResponse) (protocol.ToolResponse, bool) {
	c.forget(cid)
	select {
	case resp := <-ch:
		return resp, true
	default:
		return protocol.ToolResponse{}, false
	}
}

func (c *Bus) forget(cid string) {
	c.mu.Lock()
	delete(c.waiters, cid)
	c.mu.Unlock()
}

func (c *Bus) waitOnline(ws string) chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	c.online[ws] = append(c.online[ws], ch)
	c.mu.Unlock()
	return ch
}

func (c *Bus) dropOnline(ws string, ch chan struct{}) {
	if ch == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.online[ws]
	for i, x := range list {
		if x == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(c.online, ws)
	} else {
		c.online[ws] = list
	}
}

// cancelRemote tells the owner that nobody waits for cid any more, so the
// client can stop the work. Best effort: the owner's deadline ends the call
// anyway.
func (c *Bus) cancelRemote(ws, cid, reason string) {
	msg, _ := json.Marshal(protocol.BusMessage{Type: protocol.BusCancel, ToolCall: protocol.ToolCall{CorrelationID: cid}, Reason: reason})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.bus.Publish(ctx, protocol.WorkspaceChannel(ws), msg); err != nil {
		c.opts.Logger.Debug().Err(err).Str("correlation_id", cid).Msg("publishing cancel failed")
	}
}

// Close unsubscribes the inbox and answers every waiting call with
// caller_closed. It is idempotent.
func (c *Bus) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err1 := c.sub.Unsubscribe(ctx)
	err2 := c.onSub.Unsubscribe(ctx)
	if err1 != nil {
		return fmt.Errorf("unsubscribing caller inbox: %w", err1)
	}
	if err2 != nil {
		return fmt.Errorf("unsubscribing online announcements: %w", err2)
	}
	return nil
}
