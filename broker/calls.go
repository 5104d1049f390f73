package broker

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/internal/tracing"
	"github.com/tetherdev/tether/protocol"
)

// The pending-call table of one connection: the calls delivered to its
// client and not answered yet. It owns guaranteed response on this side of
// the socket. Whatever ends a call (the client's answer, the deadline, the
// caller cancelling, the connection closing, the broker shutting down) ends
// it by removing it from the table, so only one of them can; and finish is
// the only code that then hands the call its answer. A call refused before
// it was added (overloaded, too large, a replaced connection) is answered by
// finish too. When the owning instance itself dies, nobody here answers:
// that is the caller's own deadline (caller.BusCaller), or for an async
// call the store's sweep (async.Owner.Sweep). An async call's answer goes to the
// store instead of a caller (Broker.reply): finish is its one completion
// path too.

// callOwner is what the table needs from the connection whose calls it
// keeps. None of its methods may block.
type callOwner interface {
	// reply delivers a call's one answer (Broker.reply).
	reply(call protocol.ToolCall, w caller.Waiter, resp protocol.ToolResponse)
	// sendCancel queues a tool_cancel for the client.
	sendCancel(cid, reason string)
	// event adds the connection's fields (sid, remote, workspace_id) to a
	// log event; nil stays nil.
	event(e *zerolog.Event) *zerolog.Event
}

// ending is how a call ended. It picks the log line of the answer and
// whether the client is told to stop the work (tool_cancel).
type ending uint8

const (
	endAnswered     ending = iota // the client answered
	endTimeout                    // the deadline passed: tool_cancel
	endCancelled                  // the caller stopped waiting: tool_cancel
	endDisconnected               // the connection closed
	endShutdown                   // the broker is shutting down: tool_cancel
	endRefused                    // never delivered
)

// pending is a call delivered to the connection and not yet answered.
type pending struct {
	call  protocol.ToolCall
	ackID int64
	// timer ends the call at its deadline; nil for a call never added to
	// the table (it has no timer to stop and is not counted in flight).
	timer *time.Timer
	// waiter, when set, takes the answer in-process (a call from this
	// broker's own API); otherwise the answer goes to the store (an async
	// call) or is published to call.ReplyTo.
	waiter caller.Waiter
	// span is the call's deliver span (trace.go), ended by finish; nil
	// when tracing is off.
	span trace.Span
}

// callTable is the pending-call table of one connection.
//
// Concurrency: the table has no lock of its own; it is guarded by its
// connection's mutex (mu), so that a call is added in the same critical
// section that queues its frame. The client cannot answer a call the table
// does not know yet, and a call costs no extra lock. Methods named ...Locked
// need mu held; the others take it themselves and must be called without
// it. finish runs without mu and never blocks.
type callTable struct {
	mu         *sync.Mutex
	owner      callOwner
	log        *zerolog.Logger    // the broker's: a copy per connection would cost 100 bytes
	inFlight   prometheus.Gauge   // calls in the table, across connections
	duplicates prometheus.Counter // answers that found no call

	byID  map[string]*pending // by correlation id
	byAck map[int64]string    // ack id -> correlation id
	// nextAck is the last ack id given out. It starts at a random point
	// (firstAckSpan), not at 0: a client's ack outlives its connection.
	// socket.io-client reconnects the same Socket, and an ack its handler
	// sends after the reconnect goes out on the new connection with the
	// id of the old one. Counting from 0 on every connection, that id
	// would name the new connection's call of the same number, which would
	// take the old call's answer; from a random start it names no call of
	// the new connection and is dropped.
	nextAck int64
}

// firstAckSpan bounds where a table's ack ids start: [0, 2^31), so that
// they stay small integers for every client (JavaScript numbers are exact
// up to 2^53) and two connections' ranges overlap with a chance of about
// one in a million for a few hundred calls each.
const firstAckSpan = 1 << 31

func newCallTable(mu *sync.Mutex, owner callOwner, log *zerolog.Logger, inFlight prometheus.Gauge, duplicates prometheus.Counter) callTable {
	return callTable{
		mu:         mu,
		owner:      owner,
		log:        log,
		inFlight:   inFlight,
		duplicates: duplicates,
		byID:       make(map[string]*pending),
		byAck:      make(map[int64]string),
		nextAck:    rand.Int64N(firstAckSpan),
	}
}

// admission is admitLocked's verdict on a call.
type admission uint8

const (
	admitted admission = iota
	// resent: the same call again (a bus that resends after a broken
	// connection); it is in flight and will be answered once, so this
	// delivery is dropped without an answer.
	resent
	refused // answer the refusal at once (with finish, through refuse)
)

// admitLocked decides whether call may be added to a table holding at most
// max calls. fromBus is set for a call that came from the bus (answered on
// call.ReplyTo), as opposed to an in-process waiter.
func (t *callTable) admitLocked(call *protocol.ToolCall, fromBus bool, max int) (admission, protocol.ToolResponse) {
	if p := t.byID[call.CorrelationID]; p != nil {
		if fromBus && p.call.ReplyTo == call.ReplyTo {
			return resent, protocol.ToolResponse{}
		}
		return refused, protocol.Failure(call.CorrelationID, protocol.CodeInvalidRequest, "correlation_id already in flight from another caller")
	}
	if len(t.byID) >= max {
		return refused, protocol.Failure(call.CorrelationID, protocol.CodeOverloaded, fmt.Sprintf("workspace has %d calls in flight", len(t.byID)))
	}
	return admitted, protocol.ToolResponse{}
}

// nextAckLocked reserves the ack id of the next call's frame.
func (t *callTable) nextAckLocked() int64 {
	t.nextAck++
	return t.nextAck
}

// addLocked registers an admitted call under its ack id and starts the
// timer that ends it after remaining. span is its deliver span (nil when
// none), which finish ends.
func (t *callTable) addLocked(call protocol.ToolCall, ack int64, w caller.Waiter, remaining time.Duration, span trace.Span) {
	cid := call.CorrelationID
	t.byID[cid] = &pending{call: call, ackID: ack, waiter: w, span: span, timer: time.AfterFunc(remaining, func() { t.expire(cid) })}
	t.byAck[ack] = cid
	t.inFlight.Inc()
}

// takeLocked removes the call cid; nil when it is not in the table (never
// added, or already ended).
func (t *callTable) takeLocked(cid string) *pending {
	p := t.byID[cid]
	if p == nil {
		return nil
	}
	delete(t.byID, cid)
	delete(t.byAck, p.ackID)
	return p
}

func (t *callTable) take(cid string) *pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.takeLocked(cid)
}

// adopt makes the call cid, delivered with an in-process waiter, an async
// call from now on: its answer goes to the store (Broker.reply), not to
// the waiter. false when the call has left the table: its answer is in the
// waiter, or on its way there.
func (t *callTable) adopt(cid string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.byID[cid]
	if p == nil {
		return false
	}
	p.call.Async, p.waiter = true, nil
	return true
}

// takeAllLocked removes every call and returns them; the table stays
// usable (empty).
func (t *callTable) takeAllLocked() map[string]*pending {
	all := t.byID
	t.byID = make(map[string]*pending)
	t.byAck = make(map[int64]string)
	return all
}

// countLocked is the number of calls in the table.
func (t *callTable) countLocked() int { return len(t.byID) }

func (t *callTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.countLocked()
}

// answer ends a call with the client's response. ackID is protocol.NoAck
// for a tool_response event, which names its call by resp.CorrelationID.
// An answer for no call in the table (already answered, or not this
// connection's: a client may only answer its own calls) is dropped and
// counted, and so is an ack whose response names another call than the
// one its ack id was given to (an ack sent on a later connection than its
// call's, see nextAck): the call keeps waiting for its own answer.
func (t *callTable) answer(resp protocol.ToolResponse, ackID int64) {
	t.mu.Lock()
	if ackID != protocol.NoAck {
		cid, ok := t.byAck[ackID]
		if !ok {
			t.mu.Unlock()
			t.duplicates.Inc()
			t.owner.event(t.log.Debug()).Int64("ack", ackID).Msg("ack for no pending call dropped")
			return
		}
		if resp.CorrelationID != "" && resp.CorrelationID != cid {
			t.mu.Unlock()
			t.duplicates.Inc()
			t.owner.event(t.log.Debug()).Int64("ack", ackID).Str("correlation_id", cid).Str("answer_for", resp.CorrelationID).
				Msg("ack naming another call dropped")
			return
		}
		resp.CorrelationID = cid
	}
	p := t.takeLocked(resp.CorrelationID)
	t.mu.Unlock()
	if p == nil {
		t.duplicates.Inc()
		t.owner.event(t.log.Debug()).Str("correlation_id", resp.CorrelationID).Msg("answer for no pending call dropped")
		return
	}
	t.finish(p, endAnswered, resp, "")
}

// expire ends a call whose deadline passed (its timer runs it).
func (t *callTable) expire(cid string) {
	if p := t.take(cid); p != nil {
		t.finish(p, endTimeout, protocol.Failure(cid, protocol.CodeTimeout, fmt.Sprintf("no answer within %gs", p.call.Timeout)), "timeout")
	}
}

// cancel ends a call whose caller stopped waiting. It reports whether the
// call was in the table.
func (t *callTable) cancel(cid, reason string) bool {
	p := t.take(cid)
	if p == nil {
		return false
	}
	t.finish(p, endCancelled, protocol.Failure(cid, protocol.CodeCancelled, "caller cancelled: "+reason), reason)
	return true
}

// failAll ends every call with code (endShutdown: the client is told to
// stop each, with code as the reason).
func (t *callTable) failAll(code, msg string) {
	t.mu.Lock()
	all := t.takeAllLocked()
	t.mu.Unlock()
	t.finishAll(all, endShutdown, code, msg, code)
}

// finishAll ends calls taken with takeAllLocked, each with code and msg.
func (t *callTable) finishAll(calls map[string]*pending, end ending, code, msg, reason string) {
	for _, p := range calls {
		t.finish(p, end, protocol.Failure(p.call.CorrelationID, code, msg), reason)
	}
}

// refuse answers a call that was never added to the table; span is its
// deliver span, if one was started.
func (t *callTable) refuse(call protocol.ToolCall, w caller.Waiter, resp protocol.ToolResponse, span trace.Span) {
	t.finish(&pending{call: call, waiter: w, span: span}, endRefused, resp, "")
}

// finish hands call p its one answer, resp. It is the only code that
// answers a call of the connection: its caller removed p from the table, or
// never added it, so each call reaches finish once. It stops p's timer and
// takes p off the in-flight gauge (for a call that was added), logs how p
// ended with correlation_id, endpoint and workspace_id, delivers resp
// without blocking and, when the client may still be working on p, queues
// a tool_cancel with reason.
func (t *callTable) finish(p *pending, end ending, resp protocol.ToolResponse, reason string) {
	if p.timer != nil {
		p.timer.Stop() // a no-op for expire, which the timer runs
		t.inFlight.Dec()
	}
	t.logEnd(p, end, &resp, reason)
	tracing.EndCall(p.span, resp.Success, resp.Error)
	t.owner.reply(p.call, p.waiter, resp)
	switch end {
	case endTimeout, endCancelled, endShutdown:
		t.owner.sendCancel(p.call.CorrelationID, reason)
	}
}

// logEnd logs how call p ended: at debug level for the ordinary outcomes
// (answered, refused), at info level for the rest. zerolog's events are nil
// when their level is off, and then nothing is computed.
func (t *callTable) logEnd(p *pending, end ending, resp *protocol.ToolResponse, reason string) {
	var e *zerolog.Event
	var msg string
	switch end {
	case endAnswered:
		e, msg = t.log.Debug().Bool("success", resp.Success), "response received"
	case endRefused:
		e, msg = t.log.Debug().Str("error", resp.Error), "call answered without delivery"
	case endTimeout:
		e, msg = t.log.Info(), "call timed out"
	case endCancelled:
		e, msg = t.log.Info(), "call cancelled"
	case endDisconnected:
		e, msg = t.log.Info(), "client disconnected with call pending"
	case endShutdown:
		e, msg = t.log.Info(), "broker shutting down with call pending"
	}
	if e == nil {
		return
	}
	e = t.owner.event(e).Str("correlation_id", p.call.CorrelationID).Str("endpoint", p.call.Endpoint)
	if reason != "" && end != endTimeout {
		e = e.Str("reason", reason)
	}
	e.Msg(msg)
}
