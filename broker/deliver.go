package broker

import (
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/broker/eio"
	"github.com/tetherdev/tether/protocol"
)

// Calls from the bus to the socket: the messages of the workspace channel,
// and deliver, which adds a call to the connection's call table (calls.go)
// and queues its frame in the same critical section.

// onBusMessage handles a message on the workspace channel. It runs on the
// bus's delivery goroutine and never blocks.
func (c *conn) onBusMessage(msg []byte) {
	var m protocol.BusMessage
	if err := protocol.DecodeBusMessage(msg, &m); err != nil {
		c.event(c.b.log.Warn()).Err(err).Msg("undecodable message on workspace channel")
		return
	}
	switch m.Type {
	case protocol.BusCall:
		if c.joining.Load() && c.keepEarly(m.ToolCall) {
			return
		}
		c.deliver(m.ToolCall, nil, false, nil)
	case protocol.BusCancel:
		if !c.calls.cancel(m.CorrelationID, m.Reason) {
			c.queue.CancelClaiming(m.CorrelationID, m.Reason)
		}
	case protocol.BusDrain:
		c.queue.Kick()
	case protocol.BusTakeover:
		c.takeover(m)
	case protocol.BusYield:
		c.yielded(m)
	default:
		c.event(c.b.log.Debug()).Str("type", m.Type).Msg("unknown bus message type ignored")
	}
}

// deliver registers a call and queues it for the client, or answers it at
// once when it cannot be delivered. The answer goes to waiter when it is set,
// else to the store for an async call (async.Owner.Record), else to
// call.ReplyTo.
// claimed marks an async call this connection claimed from the store's
// queue: no other holder has it, so a replaced connection answers it
// instead of leaving it to the new holder. callSpan is the span of the
// call in this process that is delivering it (Dispatch), nil for one from
// the bus or the store (deliverSpan).
func (c *conn) deliver(call protocol.ToolCall, waiter caller.Waiter, claimed bool, callSpan trace.Span) {
	if call.ReplyTo == "" && waiter == nil && !call.Async {
		c.callEvent(c.b.log.Warn(), &call).Msg("call without reply_to dropped: nobody to answer")
		return
	}
	if err := call.Validate(); err != nil {
		c.calls.refuse(call, waiter, protocol.FailureFrom(call.CorrelationID, err, protocol.CodeInvalidRequest), nil)
		return
	}
	now := time.Now()
	deadline := now.Add(call.TimeoutDuration())
	expires := deadline // when the call table ends the call
	if call.DeadlineMS > 0 {
		// deadline_ms is the deadline in whole milliseconds, truncated:
		// the client is told the time left to its start, and the call
		// ends once that millisecond is over, never before its full
		// timeout.
		deadline = time.UnixMilli(call.DeadlineMS)
		expires = time.UnixMilli(call.DeadlineMS + 1)
	}
	remaining := deadline.Sub(now)
	if remaining <= 0 {
		c.calls.refuse(call, waiter, protocol.Failure(call.CorrelationID, protocol.CodeTimeout, "deadline passed before delivery"), nil)
		return
	}

	span, traceparent := c.deliverSpan(&call, callSpan)
	// The payload came out of a validating decoder (the bus message or
	// the HTTP body): it is copied, not parsed again.
	sent := protocol.ToolCall{
		CorrelationID: call.CorrelationID,
		Endpoint:      call.Endpoint,
		Payload:       call.Payload,
		Timeout:       remaining.Seconds(),
		Traceparent:   traceparent,
	}

	c.mu.Lock()
	if c.replaced && waiter == nil && !claimed {
		c.mu.Unlock()
		if span != nil {
			span.End() // not this connection's call: the new holder's span tells its story
		}
		return // the new holder also received it from the bus and answers
	}
	verdict, fail := c.admitLocked(&call, waiter)
	if verdict == admitted {
		ack := c.calls.nextAckLocked()
		frame := protocol.EncodeToolCallEvent(ack, &sent)
		if len(frame) > c.b.cfg.MaxPayload {
			verdict, fail = refused, protocol.Failure(call.CorrelationID, protocol.CodePayloadTooLarge, fmt.Sprintf("call is %d bytes, over the %d byte limit", len(frame), c.b.cfg.MaxPayload))
		} else {
			// Queued and added in one critical section: the client cannot
			// answer a call the table does not know yet.
			switch err := c.s.Queue(frame); err {
			case nil:
				c.calls.addLocked(call, ack, waiter, expires.Sub(now), span)
			case eio.ErrClosed:
				verdict, fail = refused, protocol.Failure(call.CorrelationID, protocol.CodeWorkspaceDisconnected, "workspace client disconnected")
			default:
				verdict, fail = refused, protocol.Failure(call.CorrelationID, protocol.CodeOverloaded, err.Error())
			}
		}
	}
	c.mu.Unlock()
	switch verdict {
	case resent:
		c.callEvent(c.b.log.Debug(), &call).Msg("duplicate delivery of a call in flight dropped")
		if span != nil {
			span.End() // the delivery in flight answers
		}
		return
	case refused:
		c.calls.refuse(call, waiter, fail, span)
		return
	}
	c.callEvent(c.b.log.Debug(), &call).Msg("call delivered to socket")
	// Write the frame on this goroutine and save a handoff: a caller of
	// this process waits for the answer anyway, and a Redis bus moves its
	// reading to another goroutine if the write blocks (the workspace's
	// later calls wait for this one, as they would in the queue).
	c.s.WriteQueued()
}

// admitLocked decides whether c takes call: not when it was replaced or
// closed, otherwise as its call table decides.
func (c *conn) admitLocked(call *protocol.ToolCall, waiter caller.Waiter) (admission, protocol.ToolResponse) {
	switch {
	case c.replaced:
		return refused, protocol.Failure(call.CorrelationID, protocol.CodeWorkspaceDisconnected, "workspace client was replaced by a newer connection")
	case c.closed:
		return refused, protocol.Failure(call.CorrelationID, protocol.CodeWorkspaceDisconnected, "workspace client disconnected")
	}
	return c.calls.admitLocked(call, waiter == nil, c.b.cfg.MaxInFlight)
}

// reply implements callOwner.
func (c *conn) reply(call protocol.ToolCall, waiter caller.Waiter, resp protocol.ToolResponse) {
	c.b.reply(call, waiter, resp)
}

// sendCancel implements callOwner: it queues a tool_cancel for the client.
func (c *conn) sendCancel(cid, reason string) {
	body, _ := json.Marshal(protocol.ToolCancel{CorrelationID: cid, Reason: reason})
	c.send(protocol.EncodeEvent(protocol.NoAck, protocol.EventToolCancel, body))
}
