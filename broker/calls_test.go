package broker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tetherdev/tether/broker/caller"
	"github.com/tetherdev/tether/protocol"
)

// These tests drive a callTable by itself: recordingOwner stands in for the
// connection and records every answer and tool_cancel the table hands it.

type recordingOwner struct {
	mu      sync.Mutex
	replies map[string][]protocol.ToolResponse
	cancels map[string][]string
	// cancelled receives the correlation id of each tool_cancel, for a test
	// that waits for one sent from a timer's goroutine.
	cancelled chan string
}

func (o *recordingOwner) reply(call protocol.ToolCall, waiter caller.Waiter, resp protocol.ToolResponse) {
	o.mu.Lock()
	o.replies[call.CorrelationID] = append(o.replies[call.CorrelationID], resp)
	o.mu.Unlock()
	if waiter != nil {
		waiter.Answer(resp) // a caller.ChanWaiter, buffered 1: a second answer would block here
	}
}

func (o *recordingOwner) sendCancel(cid, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cancels[cid] = append(o.cancels[cid], reason)
	select {
	case o.cancelled <- cid:
	default: // nobody waits for it
	}
}

func (o *recordingOwner) event(e *zerolog.Event) *zerolog.Event { return e.Str("sid", "test") }

// answers returns the answers and tool_cancel reasons recorded for cid.
func (o *recordingOwner) answers(cid string) ([]protocol.ToolResponse, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.replies[cid], o.cancels[cid]
}

type tableRig struct {
	t          *testing.T
	mu         sync.Mutex
	owner      *recordingOwner
	inFlight   prometheus.Gauge
	duplicates prometheus.Counter
	reg        *prometheus.Registry
	calls      callTable
}

// newTableRig returns a table logging at level to t.
func newTableRig(t *testing.T, level zerolog.Level) *tableRig {
	r := &tableRig{
		t:          t,
		owner:      &recordingOwner{replies: map[string][]protocol.ToolResponse{}, cancels: map[string][]string{}, cancelled: make(chan string, 1)},
		inFlight:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "in_flight"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{Name: "duplicates"}),
		reg:        prometheus.NewRegistry(),
	}
	r.reg.MustRegister(r.inFlight, r.duplicates)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(level)
	r.calls = newCallTable(&r.mu, r.owner, &log, r.inFlight, r.duplicates)
	return r
}

// metric reads a gauge or counter of the rig by name.
func (r *tableRig) metric(name string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	r.t.Fatalf("no metric %s", name)
	return 0
}

// add delivers a call the way conn.deliver does, and returns its ack id.
func (r *tableRig) add(cid string, remaining time.Duration, waiter caller.Waiter) int64 {
	r.t.Helper()
	call := protocol.ToolCall{CorrelationID: cid, Endpoint: "/api/ping", Timeout: remaining.Seconds(), ReplyTo: "inbox:test"}
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, resp := r.calls.admitLocked(&call, waiter == nil, 1024); v != admitted {
		r.t.Fatalf("call %s not admitted: %v %+v", cid, v, resp)
	}
	ack := r.calls.nextAckLocked()
	r.calls.addLocked(call, ack, waiter, remaining, nil)
	return ack
}

// disconnect ends every call the way conn.close does.
func (r *tableRig) disconnect(reason string) {
	r.mu.Lock()
	all := r.calls.takeAllLocked()
	r.mu.Unlock()
	r.calls.finishAll(all, endDisconnected, protocol.CodeWorkspaceDisconnected, "workspace client disconnected: "+reason, reason)
}

// once asserts that cid got exactly one answer, with code ("" for success),
// and the tool_cancel reasons want; and that nothing is left in flight.
func (r *tableRig) once(cid, code string, cancels ...string) protocol.ToolResponse {
	r.t.Helper()
	got, sent := r.owner.answers(cid)
	if len(got) != 1 {
		r.t.Fatalf("call %s answered %d times: %+v", cid, len(got), got)
	}
	if got[0].CorrelationID != cid || got[0].Error != code || got[0].Success != (code == "") {
		r.t.Fatalf("call %s answered %+v, want code %q", cid, got[0], code)
	}
	if fmt.Sprint(sent) != fmt.Sprint(cancels) {
		r.t.Fatalf("call %s: tool_cancel reasons %q, want %q", cid, sent, cancels)
	}
	if n := r.calls.count(); n != 0 {
		r.t.Fatalf("%d calls left in the table", n)
	}
	if v := r.metric("in_flight"); v != 0 {
		r.t.Fatalf("in-flight gauge is %v, want 0", v)
	}
	return got[0]
}

func TestCallTableAnswerByAck(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	ack := r.add("c1", time.Hour, nil)
	if v := r.metric("in_flight"); v != 1 {
		t.Fatalf("in-flight gauge is %v with one call, want 1", v)
	}
	r.calls.answer(protocol.Success("", []byte(`"pong"`)), ack)
	if resp := r.once("c1", ""); string(resp.Result) != `"pong"` {
		t.Fatalf("answer %+v lost its result", resp)
	}
}

func TestCallTableAnswerByEvent(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	r.add("c1", time.Hour, nil)
	r.calls.answer(protocol.Failure("c1", "boom", "it broke"), protocol.NoAck)
	if resp := r.once("c1", "boom"); resp.Message != "it broke" {
		t.Fatalf("answer %+v lost its message", resp)
	}
}

// TestCallTableAckNamingAnotherCallIsDropped: an ack whose response names
// another call than the one its ack id was given to answers neither (the
// chaos run's wrong_result: a client's late ack for an earlier connection's
// call took the answer slot of the new connection's call of the same ack
// id). Both calls keep waiting for their own answers.
func TestCallTableAckNamingAnotherCallIsDropped(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	a := r.add("a", time.Hour, nil)
	b := r.add("b", time.Hour, nil)
	r.calls.answer(protocol.Success("earlier", []byte(`"not a's"`)), a)
	r.calls.answer(protocol.Success("a", []byte(`"not b's"`)), b)
	if n := r.calls.count(); n != 2 {
		t.Fatalf("%d calls pending after two misaddressed acks, want both", n)
	}
	if d := r.metric("duplicates"); d != 2 {
		t.Fatalf("dropped answers counted %v, want 2", d)
	}
	r.calls.answer(protocol.Success("b", []byte(`"b's"`)), b)
	r.calls.answer(protocol.Success("a", []byte(`"a's"`)), a)
	for cid, want := range map[string]string{"a": `"a's"`, "b": `"b's"`} {
		got, _ := r.owner.answers(cid)
		if len(got) != 1 || string(got[0].Result) != want {
			t.Fatalf("call %s answered %+v, want once with %s", cid, got, want)
		}
	}
}

// TestCallTableAckIDsStartAtRandomPerConnection: a new connection's ack ids
// do not start where every other connection's do, so that an ack a client
// sends after reconnecting, for a call of its earlier connection, names no
// call of the new one (the chaos run's wrong_result, for an ack without a
// correlation id).
func TestCallTableAckIDsStartAtRandomPerConnection(t *testing.T) {
	seen := map[int64]bool{}
	for range 100 {
		r := newTableRig(t, zerolog.Disabled)
		r.mu.Lock()
		first := r.calls.nextAckLocked()
		r.mu.Unlock()
		if first < 0 || first > firstAckSpan || seen[first] {
			t.Fatalf("first ack id %d: out of [0, %d] or seen before (%d tables)", first, firstAckSpan, len(seen))
		}
		seen[first] = true
	}
}

func TestCallTableTimeoutAnswersAndCancels(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	waiter := make(caller.ChanWaiter, 1)
	start := time.Now()
	r.add("c1", 50*time.Millisecond, waiter)
	select {
	case resp := <-waiter:
		if el := time.Since(start); el < 50*time.Millisecond || el > time.Second {
			t.Fatalf("timeout answered after %s, want at the 50ms deadline", el)
		}
		if resp.Error != protocol.CodeTimeout {
			t.Fatalf("got %+v", resp)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the deadline did not answer the call")
	}
	select { // sent after the answer, from the timer's goroutine
	case <-r.owner.cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("no tool_cancel after the timeout")
	}
	r.once("c1", protocol.CodeTimeout, "timeout")
}

func TestCallTableCancelAnswersAndCancels(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	r.add("c1", time.Hour, nil)
	r.calls.cancel("c1", "caller gone")
	r.once("c1", protocol.CodeCancelled, "caller gone")
}

func TestCallTableDisconnectAnswersEveryCall(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	for i := range 5 {
		r.add(fmt.Sprint("c", i), time.Hour, nil)
	}
	r.disconnect("transport error")
	for i := range 5 {
		if resp := r.once(fmt.Sprint("c", i), protocol.CodeWorkspaceDisconnected); resp.Message != "workspace client disconnected: transport error" {
			t.Fatalf("got %+v", resp)
		}
	}
}

func TestCallTableShutdownAnswersAndCancelsEveryCall(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	for i := range 5 {
		r.add(fmt.Sprint("c", i), time.Hour, nil)
	}
	r.calls.failAll(protocol.CodeBrokerShutdown, "broker is shutting down")
	for i := range 5 {
		r.once(fmt.Sprint("c", i), protocol.CodeBrokerShutdown, protocol.CodeBrokerShutdown)
	}
	// The table still takes calls (a bus may deliver until the connection
	// closes).
	ack := r.add("after", time.Hour, nil)
	r.calls.answer(protocol.Success("", nil), ack)
	r.once("after", "")
}

func TestCallTableRefusedCallAnsweredOnce(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	call := protocol.ToolCall{CorrelationID: "c1", Endpoint: "/x", ReplyTo: "inbox:test"}
	r.calls.refuse(call, nil, protocol.Failure("c1", protocol.CodeOverloaded, "full"), nil)
	r.once("c1", protocol.CodeOverloaded)
}

func TestCallTableAdmission(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	r.add("c1", time.Hour, nil)
	try := func(call protocol.ToolCall, fromBus bool, max int) (admission, protocol.ToolResponse) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.calls.admitLocked(&call, fromBus, max)
	}
	if v, _ := try(protocol.ToolCall{CorrelationID: "c1", ReplyTo: "inbox:test"}, true, 1024); v != resent {
		t.Errorf("the same call from the bus again: %v, want resent", v)
	}
	if v, resp := try(protocol.ToolCall{CorrelationID: "c1", ReplyTo: "inbox:other"}, true, 1024); v != refused || resp.Error != protocol.CodeInvalidRequest {
		t.Errorf("another caller's call with a correlation id in flight: %v %+v, want refused invalid_request", v, resp)
	}
	if v, resp := try(protocol.ToolCall{CorrelationID: "c1"}, false, 1024); v != refused || resp.Error != protocol.CodeInvalidRequest {
		t.Errorf("an in-process call with a correlation id in flight: %v %+v, want refused invalid_request", v, resp)
	}
	if v, resp := try(protocol.ToolCall{CorrelationID: "c2", ReplyTo: "inbox:test"}, true, 1); v != refused || resp.Error != protocol.CodeOverloaded {
		t.Errorf("a call over the in-flight bound: %v %+v, want refused overloaded", v, resp)
	}
	if v, _ := try(protocol.ToolCall{CorrelationID: "c2", ReplyTo: "inbox:test"}, true, 2); v != admitted {
		t.Errorf("a call under the bound: %v, want admitted", v)
	}
}

func TestCallTableLaterAnswersDroppedAndCounted(t *testing.T) {
	r := newTableRig(t, zerolog.DebugLevel)
	ack := r.add("c1", time.Hour, nil)
	r.calls.answer(protocol.Success("", []byte(`"first"`)), ack)
	r.calls.answer(protocol.Success("", []byte(`"second"`)), ack)
	r.calls.answer(protocol.Success("c1", []byte(`"third"`)), protocol.NoAck)
	r.calls.answer(protocol.Success("never-sent", nil), protocol.NoAck)
	r.calls.expire("c1")
	r.calls.cancel("c1", "late")
	r.disconnect("late")
	r.calls.failAll(protocol.CodeBrokerShutdown, "late")
	if resp := r.once("c1", ""); string(resp.Result) != `"first"` {
		t.Fatalf("got %s, want the first answer", resp.Result)
	}
	if d := r.metric("duplicates"); d != 3 {
		t.Fatalf("duplicates counted %v, want 3", d)
	}
}

// TestCallTableRacingEndsAnswerOnce starts two (or all) ends of one call at
// the same instant, many times: whichever wins, the call has one answer, the
// client hears tool_cancel only for an end that sends one, and nothing is
// left in flight. Run it under -race. The timeout's end is expire, which is
// what the call's timer runs.
func TestCallTableRacingEndsAnswerOnce(t *testing.T) {
	type end struct {
		name string
		run  func(r *tableRig, cid string, ack int64)
	}
	reply := end{"reply", func(r *tableRig, _ string, ack int64) { r.calls.answer(protocol.Success("", []byte(`1`)), ack) }}
	event := end{"event", func(r *tableRig, cid string, _ int64) {
		r.calls.answer(protocol.Success(cid, []byte(`2`)), protocol.NoAck)
	}}
	timeout := end{"timeout", func(r *tableRig, cid string, _ int64) { r.calls.expire(cid) }}
	cancel := end{"cancel", func(r *tableRig, cid string, _ int64) { r.calls.cancel(cid, "caller gone") }}
	disconnect := end{"disconnect", func(r *tableRig, _ string, _ int64) { r.disconnect("transport error") }}
	shutdown := end{"shutdown", func(r *tableRig, _ string, _ int64) {
		r.calls.failAll(protocol.CodeBrokerShutdown, "broker is shutting down")
	}}
	// The tool_cancel each winner sends.
	cancels := map[string][]string{
		"":                                 nil,
		protocol.CodeTimeout:               {"timeout"},
		protocol.CodeCancelled:             {"caller gone"},
		protocol.CodeWorkspaceDisconnected: nil,
		protocol.CodeBrokerShutdown:        {protocol.CodeBrokerShutdown},
	}
	races := [][]end{
		{reply, timeout},
		{reply, disconnect},
		{reply, cancel},
		{reply, shutdown},
		{reply, event},
		{reply, event, timeout, cancel, disconnect, shutdown},
	}
	const rounds = 500
	for _, ends := range races {
		name := ""
		for i, e := range ends {
			if i > 0 {
				name += "_vs_"
			}
			name += e.name
		}
		t.Run(name, func(t *testing.T) {
			r := newTableRig(t, zerolog.WarnLevel)
			won := map[string]int{}
			for i := range rounds {
				cid := fmt.Sprint("c", i)
				waiter := make(caller.ChanWaiter, 1)
				ack := r.add(cid, time.Hour, waiter)
				var start, done sync.WaitGroup
				start.Add(1)
				for _, e := range ends {
					done.Go(func() {
						start.Wait()
						e.run(r, cid, ack)
					})
				}
				start.Done()
				done.Wait()
				resp := <-waiter
				r.once(cid, resp.Error, cancels[resp.Error]...)
				won[resp.Error+string(resp.Result)]++ // an answer's result says which
			}
			t.Logf("winners over %d rounds: %v", rounds, won)
		})
	}
}
