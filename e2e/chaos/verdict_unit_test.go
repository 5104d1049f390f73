package chaos

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/broker/store"
	"github.com/tetherdev/tether/protocol"
)

// The checker's own tests: a checker that cannot fail proves nothing.

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestFaultTouchesOnlyCallsOnItsPathWithinItsWindowAndSettle(t *testing.T) {
	ws := &fault{scope: scopeWorkspace, idx: 3, start: at(1000), end: at(2000)}
	brk := &fault{scope: scopeBroker, idx: 1, start: at(1000), end: at(2000)}
	all := &fault{scope: scopeAll, start: at(1000), end: at(2000)}
	none := &fault{scope: scopeNone, start: at(1000), end: at(1000)}
	call := func(ws, owner, entry, from, to int) span {
		return span{ws: ws, owner: owner, entry: entry, from: at(from), to: at(to)}
	}
	cases := []struct {
		name string
		f    *fault
		s    span
		want bool
	}{
		{"its workspace, inside", ws, call(3, 0, -1, 1200, 1300), true},
		{"its workspace, ending as it starts", ws, call(3, 0, -1, 500, 1000), true},
		{"its workspace, before", ws, call(3, 0, -1, 500, 999), false},
		{"its workspace, within settle", ws, call(3, 0, -1, 2000+int(settle/time.Millisecond)-1, 4000), true},
		{"its workspace, after settle", ws, call(3, 0, -1, 2000+int(settle/time.Millisecond)+1, 4000), false},
		{"another workspace", ws, call(4, 0, -1, 1200, 1300), false},
		{"the broker owns the workspace", brk, call(4, 1, -1, 1200, 1300), true},
		{"the call entered by the broker", brk, call(4, 0, 1, 1200, 1300), true},
		{"a bus call to another broker's workspace", brk, call(4, 0, -1, 1200, 1300), false},
		{"redis touches every call", all, call(9, 2, 0, 1900, 2100), true},
		{"an answer the broker drops touches none", none, call(3, 1, 1, 900, 1100), false},
	}
	for _, c := range cases {
		if got := c.f.touches(c.s); got != c.want {
			t.Errorf("%s: touches = %v, want %v", c.name, got, c.want)
		}
	}
	ix := newFaultIndex([]*fault{ws, brk, all, none})
	if got := ix.touching(call(3, 1, -1, 1500, 1600)); len(got) != 3 {
		t.Errorf("index: %d faults touch a call on every path, want 3", len(got))
	}
	if got := ix.touching(call(3, 1, -1, 5000, 5100)); len(got) != 0 {
		t.Errorf("index: %d faults touch a call long after them, want 0", len(got))
	}
}

func TestDisconnectIsExplainedOnlyByAFaultOnTheWorkspaceOrItsBroker(t *testing.T) {
	ws := &fault{scope: scopeWorkspace, idx: 3, start: at(1000), end: at(2000)}
	brk := &fault{scope: scopeBroker, idx: 1, start: at(1000), end: at(2000)}
	all := &fault{scope: scopeAll, start: at(1000), end: at(2000)}
	if !ws.explains(3, 0, at(1500)) || ws.explains(4, 0, at(1500)) || ws.explains(3, 0, at(999)) {
		t.Error("a workspace fault explains only its workspace's disconnections within its window")
	}
	if !brk.explains(7, 1, at(1500)) || brk.explains(7, 2, at(1500)) {
		t.Error("a broker fault explains the disconnections of the workspaces it owns only")
	}
	if all.explains(3, 0, at(1500)) {
		t.Error("a Redis fault must not explain a disconnection: the sockets do not cross Redis")
	}
	stall := &fault{scope: scopeHost, start: at(1000), end: at(2000)}
	if !stall.explains(3, 0, at(1500)) || !stall.touches(span{ws: 9, owner: 2, entry: -1, from: at(1900), to: at(2100)}) {
		t.Error("a host stall touches every call and explains any disconnection within its window")
	}
}

// testRun is a run with n workspaces (the first bridges) and no processes.
func testRun(bridges, clients int) *run {
	r := newRun(config{seed: 7}, nil)
	r.topo = &topology{brokers: []*brokerNode{{name: "b0"}, {idx: 1, name: "b1"}}}
	for i := range bridges + clients {
		w := &workspace{idx: i, id: "w" + string(rune('a'+i)), owner: i % 2, conns: &connLog{}, root: "/roots/w" + string(rune('a'+i))}
		if i >= bridges {
			w.client = &nodeClient{}
		}
		r.topo.spaces = append(r.topo.spaces, w)
	}
	r.start = t0
	return r
}

func TestJudgeRefusesAnAnswerThatIsNotThisCallsFromThisWorkspace(t *testing.T) {
	r := testRun(1, 2)
	rng := rand.New(rand.NewPCG(1, 2))
	var bridgeCall, clientCall *call
	for seq := uint64(0); bridgeCall == nil || clientCall == nil || clientCall.act.misbehaves(); seq++ {
		c := r.plan(rng, seq)
		if c.ws.bridge() && c.act == actPing {
			bridgeCall = c
		} else if !c.ws.bridge() && c.ws.idx == 1 {
			clientCall = c
		}
	}
	echo := func(c *call, ws string, payload json.RawMessage) protocol.ToolResponse {
		res, _ := json.Marshal(map[string]any{"workspace": ws, "echo": payload})
		return protocol.ToolResponse{CorrelationID: c.cid, Success: true, Result: res}
	}
	cases := []struct {
		name, want string
		c          *call
		resp       protocol.ToolResponse
	}{
		{"a bridge's echo", outcomeOK, bridgeCall, protocol.ToolResponse{CorrelationID: bridgeCall.cid, Success: true, Result: bridgeCall.payload}},
		{"a client's echo", outcomeOK, clientCall, echo(clientCall, clientCall.ws.id, clientCall.payload)},
		{"a failure with its code", protocol.CodeTimeout, clientCall, protocol.Failure(clientCall.cid, protocol.CodeTimeout, "")},
		{"another call's correlation id", "wrong_correlation_id", bridgeCall, protocol.ToolResponse{CorrelationID: clientCall.cid, Success: true, Result: bridgeCall.payload}},
		{"another call's echo", "wrong_result", bridgeCall, protocol.ToolResponse{CorrelationID: bridgeCall.cid, Success: true, Result: clientCall.payload}},
		{"another workspace's answer", "wrong_workspace", clientCall, echo(clientCall, "wc", clientCall.payload)},
		{"a forged answer", "forged_answer", clientCall, protocol.ToolResponse{CorrelationID: clientCall.cid, Success: true, Result: json.RawMessage(`{"workspace":"wc","forged":true}`)}},
		{"a failure without a code", "no_error_code", clientCall, protocol.ToolResponse{CorrelationID: clientCall.cid}},
	}
	for _, c := range cases {
		got, bad := r.judge(c.c, c.resp)
		if got != c.want || (got == outcomeOK || got == protocol.CodeTimeout) != (bad == "") {
			t.Errorf("%s: judge = %q (%q), want %q", c.name, got, bad, c.want)
		}
	}
	late := *clientCall
	late.act = actLate
	if got, _ := r.judge(&late, echo(&late, late.ws.id, late.payload)); got != "accepted_after_deadline" {
		t.Errorf("a success for a call answered only after its deadline: judge = %q, want accepted_after_deadline", got)
	}
	term := &call{cid: "x", nonce: "n1", ws: r.topo.spaces[0], act: actTerminal}
	res := func(out string) protocol.ToolResponse {
		b, _ := json.Marshal(map[string]any{"success": true, "output": out})
		return protocol.ToolResponse{CorrelationID: "x", Success: true, Result: b}
	}
	if got, _ := r.judge(term, res("n1 /roots/wa\n")); got != outcomeOK {
		t.Errorf("a command run in its own root: judge = %q, want ok", got)
	}
	if got, _ := r.judge(term, res("n1 /roots/wb\n")); got != "wrong_workspace" {
		t.Errorf("a command run in another bridge's root: judge = %q, want wrong_workspace", got)
	}
}

func TestCheckFlagsCleanFailuresDoubleAnswersMisdeliveriesAndUnexplainedDisconnects(t *testing.T) {
	r := testRun(1, 2)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r.outcomes = append(r.outcomes, protocol.CodeTimeout)
	r.records = []record{
		{ws: 0, entry: -1, way: wayBus, act: actPing, timeout: time.Second, sent: ms(100), done: ms(200), finished: true},                 // 0: clean, ok
		{ws: 0, entry: -1, way: wayBus, act: actPing, outcome: 1, timeout: time.Second, sent: ms(100), done: ms(1600), finished: true},    // 1: clean, failed
		{ws: 1, entry: 0, way: wayHTTP, act: actAck, outcome: 1, timeout: time.Second, sent: ms(5000), done: ms(6500), finished: true},    // 2: touched by the broker fault
		{ws: 2, entry: -1, way: wayBus, act: actSilent, outcome: 1, timeout: time.Second, sent: ms(100), done: ms(1600), finished: true},  // 3: its own act
		{ws: 2, entry: -1, way: wayBus, act: actAck, finished: false},                                                                     // 4: never returned
		{ws: 2, entry: -1, way: wayBus, act: actSilent, outcome: 1, timeout: time.Second, sent: ms(100), done: ms(2200), finished: true},  // 5: late
		{ws: 2, entry: -1, way: wayBus, act: actSilent, outcome: 1, timeout: time.Second, sent: ms(7000), done: ms(9200), finished: true}, // 6: late while the host stalled
	}
	r.faults.add(&fault{kind: "host_stall", scope: scopeHost, start: at(8500), end: at(8900), stall: 400 * time.Millisecond})
	r.faults.add(&fault{kind: "broker_kill", target: "b1", scope: scopeBroker, idx: 1, start: at(5500), end: at(6000)}) // owns workspace 1
	r.delivered = map[uint64]int16{2: 2}                                                                                // the call to client 1 reached client 2
	r.replies = map[uint64]uint8{0: 1, 1: 2}                                                                            // two answers for call 1
	r.topo.spaces[1].conns.add(at(5800), false, "transport close")                                                      // explained by the broker fault
	r.topo.spaces[2].conns.add(at(3000), false, "ping timeout")                                                         // explained by nothing
	v := r.check(at(10000))
	got := map[string]int{}
	for _, x := range r.violations {
		got[x.kind]++
	}
	want := map[string]int{"clean_call_failed": 1, "no_answer": 1, "delivered_elsewhere": 1, "answered_twice": 1, "unexplained_disconnect": 1, "late_answer": 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d violations, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(r.violations) != 6 {
		var all []string
		for _, x := range r.violations {
			all = append(all, x.kind+": "+x.detail)
		}
		t.Errorf("violations:\n%s\nwant exactly the six above", strings.Join(all, "\n"))
	}
	if v.clean != 2 || v.cleanFailed != 1 || v.touched != 4 || v.lateExcused != 1 {
		t.Errorf("verdict = %+v, want 2 clean (1 failed), 4 touched, 1 late answer excused by the host's stall", v)
	}
}

func TestSameFinalRefusesASecondOutcomeForOneAsyncCall(t *testing.T) {
	fin := t0.Add(time.Second)
	later := fin.Add(time.Millisecond)
	ok := store.Record{CorrelationID: "c", Status: store.Succeeded, FinishedAt: &fin,
		Response: &protocol.ToolResponse{CorrelationID: "c", Success: true, Result: json.RawMessage(`{"a": 1}`)}}
	with := func(f func(*store.Record)) store.Record {
		r := ok
		resp := *ok.Response
		r.Response = &resp
		f(&r)
		return r
	}
	cases := []struct {
		name  string
		later store.Record
		same  bool
	}{
		{"the same record", ok, true},
		{"the same result, spaced otherwise", with(func(r *store.Record) { r.Response.Result = json.RawMessage(`{"a":1}`) }), true},
		{"not final any more", with(func(r *store.Record) { r.Status = store.Delivered }), false},
		{"another status", with(func(r *store.Record) {
			r.Status = store.Cancelled
			*r.Response = protocol.Failure("c", protocol.CodeCancelled, "")
		}), false},
		{"another result", with(func(r *store.Record) { r.Response.Result = json.RawMessage(`{"a":2}`) }), false},
		{"another error code", with(func(r *store.Record) {
			r.Status = store.Succeeded
			r.Response.Success, r.Response.Error = false, protocol.CodeTimeout
		}), false},
		{"no response", with(func(r *store.Record) { r.Response = nil }), false},
		{"finished at another time", with(func(r *store.Record) { r.FinishedAt = &later }), false},
	}
	for _, c := range cases {
		if diff := sameFinal(ok, c.later); (diff == "") != c.same {
			t.Errorf("%s: sameFinal = %q, want same %v", c.name, diff, c.same)
		}
	}
}

func TestOwnRecordRefusesARecordOfAnotherCallWorkspaceOrEndpoint(t *testing.T) {
	r := testRun(1, 1)
	c := &call{cid: "c1", ws: r.topo.spaces[0], endpoint: "/api/ping"}
	good := store.Record{CorrelationID: "c1", WorkspaceID: "wa", Endpoint: "/api/ping", Status: store.Failed,
		Response: &protocol.ToolResponse{CorrelationID: "c1", Error: protocol.CodeTimeout}}
	if bad := r.ownRecord(c, good); bad != "" {
		t.Errorf("the call's own record: %s", bad)
	}
	for name, f := range map[string]func(*store.Record){
		"another correlation id":           func(x *store.Record) { x.CorrelationID = "c2" },
		"another workspace":                func(x *store.Record) { x.WorkspaceID = "wb" },
		"another endpoint":                 func(x *store.Record) { x.Endpoint = "/api/terminal/execute" },
		"final without a response":         func(x *store.Record) { x.Response = nil },
		"succeeded with a failed response": func(x *store.Record) { x.Status = store.Succeeded },
	} {
		x := good
		f(&x)
		if bad := r.ownRecord(c, x); bad == "" {
			t.Errorf("%s: ownRecord accepted it", name)
		}
	}
}

func TestOnlyAFaultsFailureIsTriedAgainOnAnotherBroker(t *testing.T) {
	for code, want := range map[string]bool{
		protocol.CodeBrokerUnreachable: true, protocol.CodeBusUnavailable: true, protocol.CodeBrokerShutdown: true,
		protocol.CodeCallNotFound: false, protocol.CodeConflict: false, protocol.CodeInvalidRequest: false,
	} {
		if got := transient(protocol.Errorf(code, "x")); got != want {
			t.Errorf("%s: transient = %v, want %v", code, got, want)
		}
	}
}

func TestCheckAcceptsALostAsyncRecordOnlyAfterARedisRestart(t *testing.T) {
	r := testRun(1, 2)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r.outcomes = append(r.outcomes, protocol.CodeCallNotFound, protocol.CodeTimeout)
	const lost, timeout = 1, 2
	r.records = []record{
		{ws: 1, entry: 0, way: wayAsync, act: actAck, outcome: lost, timeout: time.Second, sent: ms(1000), done: ms(1500), finished: true},                              // 0: lost in the restart
		{ws: 1, entry: 0, way: wayAsync, act: actAck, outcome: lost, timeout: time.Second, sent: ms(8000), done: ms(8500), finished: true},                              // 1: lost, no restart near
		{ws: 1, entry: 0, way: wayAsync, act: actAck, flags: flagLost, timeout: time.Second, sent: ms(1000), done: ms(1100), checked: ms(1300), finished: true},         // 2: seen, then lost in the restart
		{ws: 1, entry: 0, way: wayAsync, act: actAck, flags: flagLost, timeout: time.Second, sent: ms(12000), done: ms(12100), checked: ms(12200), finished: true},      // 3: seen, then lost, no restart
		{ws: 2, entry: 0, way: wayAsync, act: actSilent, outcome: timeout, timeout: time.Second, sent: ms(4000), done: ms(6500), finished: true},                        // 4: late while Redis paused
		{ws: 2, entry: 0, way: wayAsync, act: actSilent, outcome: timeout, timeout: time.Second, sent: ms(14000), done: ms(16500), finished: true},                      // 5: late, Redis fine
		{ws: 2, entry: -1, way: wayBus, act: actSilent, outcome: timeout, timeout: time.Second, sent: ms(4000), done: ms(6500), finished: true},                         // 6: a sync call late while Redis paused
		{ws: 1, entry: 0, way: wayAsync, act: actAck, timeout: time.Second, sent: ms(1000), done: ms(1800), finished: true},                                             // 7: delivered again after the restart
		{ws: 1, entry: 0, way: wayAsync, act: actAck, timeout: time.Second, sent: ms(10000), done: ms(10100), finished: true},                                           // 8: delivered twice, no restart
		{ws: 1, entry: 0, way: wayAsync, act: actAck, flags: flagRecreated, timeout: time.Second, sent: ms(1000), done: ms(1100), checked: ms(1300), finished: true},    // 9: made anew by the keyed resubmit after the restart
		{ws: 1, entry: 0, way: wayAsync, act: actAck, flags: flagRecreated, timeout: time.Second, sent: ms(12000), done: ms(12100), checked: ms(12200), finished: true}, // 10: made anew, no restart
	}
	r.faults.add(&fault{kind: "redis_restart", target: "redis", scope: scopeAll, start: at(1200), end: at(1400)})
	r.faults.add(&fault{kind: "redis_pause", target: "redis", scope: scopeAll, start: at(5200), end: at(5600)})
	r.delivered = map[uint64]int16{7: 1, 8: 1}
	r.again = map[uint64]int16{7: 1, 8: 1}
	v := r.check(at(20000))
	got := map[string][]uint64{}
	for _, x := range r.violations {
		got[x.kind] = append(got[x.kind], x.seq)
	}
	// Call 1 also failed with no fault on its path.
	want := map[string][]uint64{"record_lost": {1, 3}, "two_finals": {10}, "late_answer": {5, 6}, "delivered_twice": {8}, "clean_call_failed": {1}}
	for k, seqs := range want {
		slices.Sort(got[k])
		if !slices.Equal(got[k], seqs) {
			t.Errorf("%s: calls %v, want %v", k, got[k], seqs)
		}
	}
	if len(r.violations) != 7 {
		t.Errorf("%d violations (%v), want the seven above", len(r.violations), got)
	}
	if v.asyncLost != 3 || v.asyncLateRedis != 1 || v.redeliveredLost != 1 {
		t.Errorf("verdict = %+v, want 3 records lost to the restart (one of them made anew by its keyed resubmit), 1 late outcome excused by the pause, 1 call delivered again after the restart", v)
	}
}

func TestAwaitCancelsReturnsOnceTheLastDueToolCancelIsReported(t *testing.T) {
	r := testRun(1, 2)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r.outcomes = append(r.outcomes, protocol.CodeTimeout)
	r.records = []record{
		{ws: 1, entry: -1, way: wayBus, act: actSilent, outcome: 1, timeout: time.Second, sent: ms(100), done: ms(1100), finished: true}, // 0: timed out at a silent client
		{ws: 2, entry: -1, way: wayBus, act: actAck, timeout: time.Second, sent: ms(100), done: ms(200), finished: true},                 // 1: answered: no cancel due
	}
	r.delivered = map[uint64]int16{0: 1, 1: 2}
	go func() {
		time.Sleep(50 * time.Millisecond) // the report arrives late, as after a run's last timeout: the delay is the subject
		r.onCancelled(r.cid(0))
	}()
	began := time.Now()
	r.awaitCancels(5 * time.Second)
	if took := time.Since(began); took < 50*time.Millisecond || took > 2*time.Second {
		t.Fatalf("awaitCancels took %s: want it to return when the report arrives, after 50 ms", took)
	}
	if v := r.check(at(10000)); v.cancelsDue != 1 || v.cancelsSeen != 1 || len(r.violations) != 0 {
		t.Fatalf("cancels due %d, seen %d, violations %v: want 1, 1, none", v.cancelsDue, v.cancelsSeen, r.violations)
	}
}

func TestAwaitCancelsGivesUpAtItsBound(t *testing.T) {
	r := testRun(1, 2)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r.outcomes = append(r.outcomes, protocol.CodeTimeout)
	r.records = []record{{ws: 1, entry: -1, way: wayBus, act: actSilent, outcome: 1, timeout: time.Second, sent: ms(100), done: ms(1100), finished: true}}
	r.delivered = map[uint64]int16{0: 1}
	began := time.Now()
	r.awaitCancels(100 * time.Millisecond)
	if took := time.Since(began); took < 100*time.Millisecond || took > 2*time.Second {
		t.Fatalf("awaitCancels took %s with a report that never comes: want its 100 ms bound", took)
	}
	if r.check(at(10000)); len(r.violations) != 1 || r.violations[0].kind != "no_tool_cancel" {
		t.Fatalf("violations %v: want one no_tool_cancel", r.violations)
	}
}
