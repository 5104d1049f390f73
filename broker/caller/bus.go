package caller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/bus"
	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// DefaultGrace is how long past a call's deadline a BusCaller waits for the
// owner's answer before answering timeout itself (the owner died, or the bus
// lost the reply).
const DefaultGrace = 500 * time.Millisecond

// BusCallerOptions configure a BusCaller.
type BusCallerOptions struct {
	// Grace past the deadline; zero means DefaultGrace.
	Grace  time.Duration
	Logger zerolog.Logger
	// OnUnmatched is called for each reply that found no waiter (it came
	// after the caller gave up). Optional; for metrics.
	OnUnmatched func()
	// Store keeps the records of async calls (Submit, Status, Wait,
	// Cancel): the brokers' store (store.NewRedis on the same Redis and
	// prefix as the bus). Without it those methods fail invalid_request.
	// The caller does not close it.
	Store store.Store
}

// BusCaller is a Caller that travels over a bus.Bus (HTTP is the other
// one): one inbox subscription serves every call of the process, waiters
// are registered before publishing and removed exactly once (reply,
// deadline, cancel, close). All methods are safe for concurrent use.
type BusCaller struct {
	bus   bus.Bus
	inbox string
	opts  BusCallerOptions
	sub   bus.Subscription
	onSub bus.Subscription

	mu      sync.Mutex
	waiters map[string]chan event
	// gathers take every reply to their correlation id (see Gather).
	gathers map[string]chan protocol.ToolResponse
	// online wakes calls that wait for their workspace to be served.
	online map[string][]chan struct{}
	closed bool
	done   chan struct{}

	unmatched atomic.Int64
}

// NewBusCaller subscribes a fresh inbox on b and returns a caller. Close
// releases it; b stays open.
func NewBusCaller(ctx context.Context, b bus.Bus, opts BusCallerOptions) (*BusCaller, error) {
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	c := &BusCaller{
		bus:     b,
		inbox:   "inbox:" + uuid.NewString(),
		opts:    opts,
		waiters: make(map[string]chan event),
		gathers: make(map[string]chan protocol.ToolResponse),
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
func (c *BusCaller) Inbox() string { return c.inbox }

// Pending returns the number of registered waiters (for leak tests).
func (c *BusCaller) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// Unmatched returns how many replies arrived for no waiter.
func (c *BusCaller) Unmatched() int64 { return c.unmatched.Load() }

func (c *BusCaller) onReply(msg []byte) {
	var resp protocol.ToolResponse
	if err := protocol.DecodeToolResponse(msg, &resp); err != nil {
		c.opts.Logger.Warn().Err(err).Msg("undecodable reply on caller inbox")
		return
	}
	c.mu.Lock()
	if g, ok := c.gathers[resp.CorrelationID]; ok {
		c.mu.Unlock()
		select {
		case g <- resp:
		default: // more answers than the gather has room for: dropped
		}
		return
	}
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
	ch <- event{resp: resp} // the one reply send (see event): never blocks
}

// event is what a waiting call receives: its reply, or the outcome of an
// asynchronous publish that reached nobody or failed. A call's channel has
// room for both, and at most one publish of a call is outstanding, so no
// send blocks.
type event struct {
	resp protocol.ToolResponse
	// published is set for a publish outcome: only a publish that reached
	// nobody (err nil) or failed (err) is reported.
	published bool
	err       error
}

func (c *BusCaller) onOnline(msg []byte) {
	ws := string(msg)
	c.mu.Lock()
	chans := c.online[ws]
	delete(c.online, ws)
	c.mu.Unlock()
	for _, ch := range chans {
		close(ch)
	}
}

// Call implements Caller. When ctx carries a span context, the call's
// crossing of the bus is a span of its own ("tether.bus.publish"), whose
// trace context the message carries to the holding broker.
func (c *BusCaller) Call(ctx context.Context, req Request) protocol.ToolResponse {
	cid := req.CorrelationID
	if cid == "" {
		cid = uuid.NewString()
	}
	span, traceparent := publishSpan(ctx, &req, cid)
	resp := c.call(ctx, req, cid, traceparent)
	tracing.EndCall(span, resp.Success, resp.Error)
	return resp
}

// call is Call with the correlation id and the trace context settled.
func (c *BusCaller) call(ctx context.Context, req Request, cid, traceparent string) protocol.ToolResponse {
	timeout := req.timeout()
	start := time.Now()
	deadline := start.Add(timeout)
	call := protocol.BusMessage{ToolCall: protocol.ToolCall{
		CorrelationID: cid,
		Endpoint:      req.Endpoint,
		Payload:       req.Payload,
		Timeout:       timeout.Seconds(),
		ReplyTo:       c.inbox,
		DeadlineMS:    deadline.UnixMilli(),
		Traceparent:   traceparent,
	}}
	if err := call.Validate(); err != nil {
		return protocol.FailureFrom(cid, err, protocol.CodeInvalidRequest)
	}
	if req.WaitForWorkspace < 0 {
		return protocol.Failure(cid, protocol.CodeInvalidRequest, "wait_for_workspace must not be negative")
	}
	waits := req.WaitForWorkspace > 0
	call.WaitForWorkspaceMS = req.WaitForWorkspace.Milliseconds()
	if len(req.Payload) > 0 && !protocol.Valid(req.Payload) {
		return protocol.Failure(cid, protocol.CodeInvalidRequest, "payload is not valid JSON")
	}
	msg := protocol.AppendBusMessage(make([]byte, 0, 160+len(req.Payload)+len(traceparent)), &call)
	w := &waiting{c: c, ctx: ctx, req: req, cid: cid, timeout: timeout}

	ch := make(chan event, 2)
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
	var waitTimer *time.Timer // the end of the wait for the workspace
	waitEnd, waitCode := req.waitEnd(start)
	if waits {
		waitTimer = time.NewTimer(time.Until(waitEnd))
		defer waitTimer.Stop()
	}
	for {
		var wake chan struct{}
		if waits {
			// Registered before publishing, so an announcement between the
			// publish and the wait is not missed.
			wake = c.waitOnline(req.WorkspaceID)
		}
		// The command goes out now. Its count is reported on ch only when
		// it is 0 or the publish failed; the reply may come first either
		// way. PublishAsync keeps no reference to msg, so a retry reuses it.
		c.bus.PublishAsync(channel, msg, func(n int, err error) {
			if err != nil || n == 0 {
				ch <- event{published: true, err: err}
			}
		})
		w.log(c.opts.Logger.Debug()).Msg("call routed")
		resp, offline := w.await(ch, timer)
		if !offline {
			c.dropOnline(req.WorkspaceID, wake)
			return resp
		}
		if !waits {
			c.forget(cid)
			w.log(c.opts.Logger.Debug()).Msg("workspace offline")
			return protocol.Failure(cid, protocol.CodeWorkspaceOffline, fmt.Sprintf("no client serves workspace %q", req.WorkspaceID))
		}
		w.log(c.opts.Logger.Debug()).Msg("waiting for workspace")
		select {
		case <-wake:
			continue
		case <-waitTimer.C:
			c.dropOnline(req.WorkspaceID, wake)
			c.forget(cid)
			if waitCode == protocol.CodeTimeout {
				return protocol.Failure(cid, waitCode, fmt.Sprintf("workspace %q did not connect before the deadline; the call was never delivered", req.WorkspaceID))
			}
			return protocol.Failure(cid, waitCode, fmt.Sprintf("no client served workspace %q within %s; the call was never delivered", req.WorkspaceID, req.WaitForWorkspace))
		case <-ctx.Done():
			c.dropOnline(req.WorkspaceID, wake)
			c.forget(cid)
			return protocol.Failure(cid, protocol.CodeCancelled, "caller gave up: "+ctx.Err().Error())
		case <-c.done:
			c.forget(cid)
			return protocol.Failure(cid, protocol.CodeCallerClosed, "caller closed")
		}
	}
}

// maxGather bounds the answers one Gather collects.
const maxGather = 1024

// Gather publishes msg (a request carrying correlation id cid and this
// caller's inbox as reply_to) to channel and collects the replies, one per
// subscriber the publish reached, until all arrived or ctx ends. It returns
// the replies and how many subscribers the publish reached; fewer replies
// than that means some did not answer in time.
func (c *BusCaller) Gather(ctx context.Context, channel, cid string, msg []byte) ([]protocol.ToolResponse, int, error) {
	ch := make(chan protocol.ToolResponse, maxGather)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, 0, errors.New("caller is closed")
	}
	if _, dup := c.gathers[cid]; dup {
		c.mu.Unlock()
		return nil, 0, errors.New("correlation_id already in flight")
	}
	c.gathers[cid] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.gathers, cid)
		c.mu.Unlock()
	}()
	n, err := c.bus.Publish(ctx, channel, msg)
	if err != nil {
		return nil, 0, fmt.Errorf("publishing to %s: %w", channel, err)
	}
	var got []protocol.ToolResponse
	for len(got) < min(n, maxGather) {
		select {
		case resp := <-ch:
			got = append(got, resp)
		case <-ctx.Done():
			return got, n, nil
		case <-c.done:
			return got, n, nil
		}
	}
	return got, n, nil
}

// waiting is one Call in progress, for its helpers.
type waiting struct {
	c       *BusCaller
	ctx     context.Context
	req     Request
	cid     string
	timeout time.Duration
}

func (w *waiting) log(e *zerolog.Event) *zerolog.Event {
	return e.Str("correlation_id", w.cid).Str("endpoint", w.req.Endpoint).Str("workspace_id", w.req.WorkspaceID)
}

// await waits for the call's answer after a publish. offline reports that
// the publish reached nobody: the waiter is still registered and the caller
// decides what follows. Every other outcome is final, its waiter removed.
func (w *waiting) await(ch chan event, timer *time.Timer) (resp protocol.ToolResponse, offline bool) {
	c, cid := w.c, w.cid
	select {
	case ev := <-ch:
		switch {
		case !ev.published:
			return ev.resp, false
		case ev.err != nil:
			c.forget(cid)
			return w.publishFailed(ev.err), false
		}
		return protocol.ToolResponse{}, true
	case <-timer.C:
		if resp, ok := c.giveUp(cid, ch); ok {
			return resp, false
		}
		w.log(c.opts.Logger.Warn()).Msg("no answer from the owner by the deadline; answering timeout")
		return protocol.Failure(cid, protocol.CodeTimeout, fmt.Sprintf("no answer within %s", w.timeout)), false
	case <-w.ctx.Done():
		if resp, ok := c.giveUp(cid, ch); ok {
			return resp, false
		}
		c.cancelRemote(w.req.WorkspaceID, cid, "caller gone")
		return protocol.Failure(cid, protocol.CodeCancelled, "caller gave up: "+w.ctx.Err().Error()), false
	case <-c.done:
		if resp, ok := c.giveUp(cid, ch); ok {
			return resp, false
		}
		return protocol.Failure(cid, protocol.CodeCallerClosed, "caller closed"), false
	}
}

// publishFailed answers a call whose publish failed.
func (w *waiting) publishFailed(err error) protocol.ToolResponse {
	if dl, ok := w.ctx.Deadline(); w.ctx.Err() != nil || (ok && !time.Now().Before(dl)) {
		// The caller gave up while publishing (a socket deadline from ctx
		// may fire a moment before ctx does); the call may have gone out
		// all the same.
		w.c.cancelRemote(w.req.WorkspaceID, w.cid, "caller gone")
		return protocol.Failure(w.cid, protocol.CodeCancelled, "caller gave up while publishing: "+err.Error())
	}
	w.log(w.c.opts.Logger.Warn()).Err(err).Msg("publishing call failed")
	return protocol.Failure(w.cid, protocol.CodeBusUnavailable, "publishing call: "+err.Error())
}

// giveUp removes the waiter; a reply that raced in wins.
func (c *BusCaller) giveUp(cid string, ch chan event) (protocol.ToolResponse, bool) {
	c.forget(cid)
	for {
		select {
		case ev := <-ch:
			if !ev.published {
				return ev.resp, true
			}
		default:
			return protocol.ToolResponse{}, false
		}
	}
}

func (c *BusCaller) forget(cid string) {
	c.mu.Lock()
	delete(c.waiters, cid)
	c.mu.Unlock()
}

func (c *BusCaller) waitOnline(ws string) chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	c.online[ws] = append(c.online[ws], ch)
	c.mu.Unlock()
	return ch
}

func (c *BusCaller) dropOnline(ws string, ch chan struct{}) {
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
func (c *BusCaller) cancelRemote(ws, cid, reason string) {
	msg, _ := json.Marshal(protocol.BusMessage{Type: protocol.BusCancel, ToolCall: protocol.ToolCall{CorrelationID: cid}, Reason: reason})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.bus.Publish(ctx, protocol.WorkspaceChannel(ws), msg); err != nil {
		c.opts.Logger.Debug().Err(err).Str("correlation_id", cid).Msg("publishing cancel failed")
	}
}

// Close unsubscribes the inbox and answers every waiting call with
// caller_closed. It is idempotent.
func (c *BusCaller) Close() error {
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
