//go:build !windows

package bridge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/audit"
	"github.com/tetherdev/tether/protocol"
)

// DefaultMaxInFlight is the number of handlers that may run at once when
// Config.MaxInFlight is zero.
const DefaultMaxInFlight = 64

// The handler deadline leaves this much of the call's timeout for the answer
// to travel back, so handler_timeout reaches the broker before the broker's
// own timeout fires: 10% of the timeout, clamped to these bounds.
const (
	minHandlerMargin = 50 * time.Millisecond
	maxHandlerMargin = 500 * time.Millisecond
)

var errHandlerDeadline = errors.New("handler deadline passed")

// cancelledByBroker is the cause of a handler context ended by tool_cancel.
type cancelledByBroker struct{ reason string }

func (e *cancelledByBroker) Error() string { return "cancelled by the broker: " + e.reason }

// dispatcher runs calls through the router and turns every way a call can end
// into exactly one ToolResponse. It is safe for concurrent use.
type dispatcher struct {
	router *Router
	audit  *audit.Log      // nil: off (audit.go)
	log    *zerolog.Logger // carries workspace_id
	wsID   string

	// slots bounds the handlers running at once. A slot is held until the
	// handler goroutine ends, not until the response is sent, so handlers that
	// overrun their deadline still count.
	slots chan struct{}

	// handlers counts handler goroutines; Bridge.Run waits for it.
	handlers sync.WaitGroup
}

func newDispatcher(r *Router, log *zerolog.Logger, workspaceID string, maxInFlight int) *dispatcher {
	return &dispatcher{router: r, log: log, wsID: workspaceID, slots: make(chan struct{}, maxInFlight)}
}

// callLog adds the call path's fields to each event. Unlike a per-call
// sub-logger it allocates nothing when the level is off, which matters on
// the hot path.
type callLog struct {
	l        *zerolog.Logger
	id       string
	endpoint string
}

func (c callLog) with(e *zerolog.Event) *zerolog.Event {
	return e.Str("correlation_id", c.id).Str("endpoint", c.endpoint)
}

func (c callLog) Debug() *zerolog.Event { return c.with(c.l.Debug()) }
func (c callLog) Info() *zerolog.Event  { return c.with(c.l.Info()) }
func (c callLog) Warn() *zerolog.Event  { return c.with(c.l.Warn()) }
func (c callLog) Error() *zerolog.Event { return c.with(c.l.Error()) }

func (d *dispatcher) callLog(call *protocol.ToolCall) callLog {
	return callLog{l: d.log, id: call.CorrelationID, endpoint: call.Endpoint}
}

// dispatch serves call for a transport that can wait for the answer (the
// in-process API and the local HTTP listener): it checks, bounds, runs and
// returns the one response. It blocks until the response is decided, which
// is before the call's timeout.
func (d *dispatcher) dispatch(ctx context.Context, call *protocol.ToolCall, received time.Time, transport string) (resp protocol.ToolResponse) {
	ctx = d.withNote(ctx)
	defer func() { d.audited(ctx, transport, call, received, &resp) }()
	log := d.callLog(call)
	log.Info().Str("transport", transport).Float64("timeout", call.Timeout).Msg("call received")
	ctx, span := d.startSpan(ctx, call, received, transport, log)
	resp = d.admit(ctx, call, received, log)
	endSpan(span, resp)
	return resp
}

// admit is dispatch after the call is logged and its span started.
func (d *dispatcher) admit(ctx context.Context, call *protocol.ToolCall, received time.Time, log callLog) protocol.ToolResponse {
	if resp, ok := precheck(call); !ok {
		return resp
	}
	if !d.tryAcquire() {
		return overloaded(call, cap(d.slots))
	}
	return d.serve(ctx, call, received, log)
}

// precheck rejects calls that cannot be routed before they take a slot.
func precheck(call *protocol.ToolCall) (protocol.ToolResponse, bool) {
	if call.Endpoint == "" || call.Endpoint[0] != '/' {
		return protocol.Failure(call.CorrelationID, protocol.CodeUnknownRoute,
			fmt.Sprintf("endpoint %q is not a route path", call.Endpoint)), false
	}
	if t := call.Timeout; math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
		return protocol.Failure(call.CorrelationID, protocol.CodeInvalidPayload,
			fmt.Sprintf("timeout must be a non-negative number of seconds, got %v", t)), false
	}
	return protocol.ToolResponse{}, true
}

func overloaded(call *protocol.ToolCall, limit int) protocol.ToolResponse {
	return protocol.Failure(call.CorrelationID, protocol.CodeOverloaded,
		fmt.Sprintf("the bridge already runs %d calls", limit))
}

// callTimeout turns the wire timeout into a duration: 0 (absent) means the
// protocol default, and the protocol maximum caps it.
func callTimeout(seconds float64) time.Duration {
	if seconds == 0 {
		seconds = protocol.DefaultTimeout
	}
	seconds = min(seconds, protocol.MaxTimeout)
	return time.Duration(seconds * float64(time.Second))
}

// handlerBudget is how long a handler may run for a call with timeout t.
func handlerBudget(t time.Duration) time.Duration {
	margin := min(max(t/10, minHandlerMargin), maxHandlerMargin)
	return t - margin
}

func (d *dispatcher) tryAcquire() bool {
	select {
	case d.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (d *dispatcher) release() { <-d.slots }

// serve runs call, whose slot the caller holds, and returns its response. It
// returns when the handler does, or at the handler deadline, or when ctx
// ends, whichever comes first; in the last two cases the handler goroutine is
// left to finish on its own (its context is done) and releases the slot then.
func (d *dispatcher) serve(ctx context.Context, call *protocol.ToolCall, received time.Time, log callLog) protocol.ToolResponse {
	st, timeout, cancel := d.prepare(ctx, call, received, log)
	defer cancel()
	hctx := st.ctx
	done := make(chan struct{})
	var abandoned atomic.Bool
	d.handlers.Add(1)
	go d.runHandler(st, done, &abandoned, log)

	select {
	case <-done:
		return d.outcome(st, timeout, log)
	case <-hctx.Done():
		select {
		case <-done: // finished in the same instant: its own answer wins
			return d.outcome(st, timeout, log)
		default:
		}
		abandoned.Store(true)
		return d.contextFailure(hctx, call.CorrelationID, call.Endpoint, timeout, log)
	}
}

// serveInline runs call, whose slot the caller holds, on the calling
// goroutine and passes its one response to respond: the handler's own, or,
// if the handler's context ends first (deadline, tool_cancel, disconnect),
// the context failure, sent at that moment from the context's callback. It
// returns when the handler does, having released the slot. The socket path
// uses it to save the goroutine and handoff that serve spends per call.
func (d *dispatcher) serveInline(ctx context.Context, call *protocol.ToolCall, received time.Time, log callLog, respond func(protocol.ToolResponse)) {
	ctx = d.withNote(ctx)
	respond = d.auditing(ctx, call, received, respond)
	st, timeout, cancel := d.prepare(ctx, call, received, log)
	defer cancel()
	hctx := st.ctx
	var answered atomic.Bool
	stop := context.AfterFunc(hctx, func() {
		if answered.CompareAndSwap(false, true) {
			respond(d.contextFailure(hctx, call.CorrelationID, call.Endpoint, timeout, log))
		}
	})
	start := time.Now()
	d.invoke(st, log)
	stop()
	d.release()
	if answered.CompareAndSwap(false, true) {
		log.Debug().Dur("duration", time.Since(start)).Msg("handler done")
		respond(d.outcome(st, timeout, log))
		return
	}
	log.Warn().Dur("duration", time.Since(start)).Msg("handler finished after its call was answered; it should honour ctx")
}

func (d *dispatcher) runHandler(st *callState, done chan<- struct{}, abandoned *atomic.Bool, log callLog) {
	defer d.handlers.Done()
	start := time.Now()
	defer func() {
		if abandoned.Load() {
			log.Warn().Dur("duration", time.Since(start)).
				Msg("handler finished after its call was answered; it should honour ctx")
		} else {
			log.Debug().Dur("duration", time.Since(start)).Msg("handler done")
		}
		// Release before signalling, so a caller that saw the answer can
		// send its next call without meeting a slot that is about to free.
		d.release()
		close(done)
	}()
	d.invoke(st, log)
}

// prepare builds the state of one call: its handler context ends at the
// handler deadline (before the broker's) or with ctx.
func (d *dispatcher) prepare(ctx context.Context, call *protocol.ToolCall, received time.Time, log callLog) (*callState, time.Duration, context.CancelFunc) {
	d.router.freeze()
	timeout := callTimeout(call.Timeout)
	deadline := received.Add(handlerBudget(timeout))
	hctx, cancel := context.WithDeadlineCause(ctx, deadline, errHandlerDeadline)
	return &callState{ctx: hctx, call: Call{
		correlationID: call.CorrelationID,
		endpoint:      call.Endpoint,
		workspaceID:   d.wsID,
		payload:       call.Payload,
		deadline:      deadline,
		log:           log,
		note:          audit.NoteFrom(ctx),
	}}, timeout, cancel
}

// invoke runs the route's handler; a panic becomes internal_error.
func (d *dispatcher) invoke(st *callState, log callLog) {
	defer func() {
		if v := recover(); v != nil {
			log.Error().Interface("panic", v).Bytes("stack", debug.Stack()).Msg("handler panicked")
			st.err = protocol.Errorf(protocol.CodeInternalError, "handler for %s panicked: %v", st.call.endpoint, v)
		}
	}()
	d.router.serve(st)
}

// outcome converts what the handler left in st into the response.
func (d *dispatcher) outcome(st *callState, timeout time.Duration, log callLog) protocol.ToolResponse {
	id := st.call.correlationID
	if st.err == nil {
		return protocol.Success(id, st.result)
	}
	var pe *protocol.Error
	if errors.As(st.err, &pe) {
		return protocol.Failure(id, pe.Code, pe.Message)
	}
	if st.ctx.Err() != nil {
		// The handler gave up because its context ended; say why the
		// context ended, not what the handler made of it.
		return d.contextFailure(st.ctx, id, st.call.endpoint, timeout, log)
	}
	log.Warn().Err(st.err).Msg("handler failed")
	return protocol.Failure(id, protocol.CodeInternalError, st.err.Error())
}

func (d *dispatcher) contextFailure(hctx context.Context, id, endpoint string, timeout time.Duration, log callLog) protocol.ToolResponse {
	cause := context.Cause(hctx)
	var byBroker *cancelledByBroker
	switch {
	case errors.Is(cause, errHandlerDeadline):
		log.Warn().Dur("timeout", timeout).Msg("handler timed out")
		return protocol.Failure(id, protocol.CodeHandlerTimeout,
			fmt.Sprintf("handler for %s did not finish within %v (call timeout %v)", endpoint, handlerBudget(timeout), timeout))
	case errors.As(cause, &byBroker):
		log.Info().Str("reason", byBroker.reason).Msg("call cancelled")
		return protocol.Failure(id, protocol.CodeCancelled, byBroker.Error())
	default:
		log.Info().AnErr("cause", cause).Msg("call cancelled")
		return protocol.Failure(id, protocol.CodeCancelled, "call abandoned: "+cause.Error())
	}
}
