package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/tetherdev/tether/protocol"
)

// The invariants, checked once the run is over:
//
//  1. Exactly one answer per call. Each caller returns one answer per call
//     (checked as it arrives: one per Call, carrying the call's own
//     correlation id); no call reaches a socket.io client twice; and no
//     call has two answers published to a caller's inbox (the spy, a
//     pattern subscription to every inbox, counts them). An async call
//     has exactly one final outcome: the final record Wait returned is the
//     one a later Status from another broker, and a later keyed submit,
//     return (checked as the call ends, async_test.go).
//  2. Every answer no later than the call's deadline plus lateBound (1 s),
//     unless the host stalled between the deadline and the answer.
//  3. An answer's correlation id and payload belong to its call: the echo
//     carries the call's nonce, and the workspace that answered is the one
//     called (a client names itself, a bridge's command prints its root).
//  4. A call no fault touched succeeded.
//  5. No answer came from another workspace (3), no call was delivered to
//     another client than the one called, and no forged answer (a client
//     answering a call it was not given) reached a caller.
//  6. Every disconnection of a workspace was caused by a fault on its path,
//     every fault healed within recoverWait, and a killed bridge left no
//     process running.
//  7. A call delivered to a client and then given up (its deadline passed,
//     or its caller cancelled it) brought the client a tool_cancel, unless
//     a fault touched it.
//
// When a fault touches a call. A call's path is its workspace, the broker
// that owns the workspace, the broker it entered by (HTTP calls), and
// Redis, which every call crosses. A fault has a scope (a workspace, a
// broker, everything, or nothing) and a window, from its injection to its
// observed recovery plus settle. A fault touches a call when its scope is
// on the call's path and its window overlaps the call's time, from sent to
// answered. A call whose act is to answer late or never is touched by its
// own act. Every other call is clean and must succeed.
//
// Async calls (async_test.go) keep their outcome in Redis, so two more
// rules hold for them. A Redis fault (a restart or a pause) on or after a
// call's deadline may hold up its outcome (the owner cannot record it, the
// sweep cannot end it, a waiter cannot read it) until Redis is back: a
// late outcome is excused when a Redis fault touches the time from its
// deadline to its outcome. And the run's Redis restarts empty: a restart
// loses the records in flight, which then answer call_not_found (main's
// promise, docs/async-calls.md, has nothing stronger without persistence).
// A lost record, before the outcome or after it was seen, is a violation
// unless a Redis restart touched the call up to that read; so is a call
// delivered twice, unless a Redis restart lost its record in between and a
// keyed resubmit made it again.
//
// A host stall (the test process not scheduled for more than stallGap) is
// recorded as a fault that touches every call and may explain any
// disconnection: no process can keep a deadline while the machine does not
// run it.

// settle is how long after a fault's observed recovery it may still touch
// a call: the recovery is observed by polling, and what it started (a
// resubscription, a reannouncement) may take a moment to finish on the
// other instances.
const settle = time.Second

// span is a call's place and time, as touching needs them.
type span struct {
	ws, owner, entry int // entry -1: not through a broker's API
	from, to         time.Time
}

// touches reports whether f touches a call over s.
func (f *fault) touches(s span) bool {
	if s.to.Before(f.start) || s.from.After(f.end.Add(settle)) {
		return false
	}
	switch f.scope {
	case scopeAll, scopeHost:
		return true
	case scopeWorkspace:
		return f.idx == s.ws
	case scopeBroker:
		return f.idx == s.owner || f.idx == s.entry
	}
	return false
}

// explains reports whether f accounts for workspace ws (owned by owner)
// losing its connection at at.
func (f *fault) explains(ws, owner int, at time.Time) bool {
	if at.Before(f.start) || at.After(f.end.Add(settle)) {
		return false
	}
	return f.scope == scopeHost || (f.scope == scopeWorkspace && f.idx == ws) || (f.scope == scopeBroker && f.idx == owner)
}

// faultIndex finds the faults that may overlap a time range.
type faultIndex struct {
	faults  []*fault // by start
	longest time.Duration
}

func newFaultIndex(faults []*fault) faultIndex {
	fs := slices.Clone(faults)
	sort.Slice(fs, func(i, j int) bool { return fs[i].start.Before(fs[j].start) })
	ix := faultIndex{faults: fs}
	for _, f := range fs {
		ix.longest = max(ix.longest, f.end.Sub(f.start)+settle)
	}
	return ix
}

// touching returns the faults that touch s.
func (ix faultIndex) touching(s span) []*fault {
	// Faults starting after s ends cannot touch it; those starting more
	// than the longest window before it neither.
	hi := sort.Search(len(ix.faults), func(i int) bool { return ix.faults[i].start.After(s.to) })
	var out []*fault
	for i := hi - 1; i >= 0 && !ix.faults[i].start.Before(s.from.Add(-ix.longest)); i-- {
		if ix.faults[i].touches(s) {
			out = append(out, ix.faults[i])
		}
	}
	return out
}

// stalled reports whether a host stall overlaps [from, to].
func (ix faultIndex) stalled(from, to time.Time) bool {
	for _, f := range ix.touching(span{ws: -1, owner: -1, entry: -1, from: from, to: to}) {
		if f.scope == scopeHost && !f.start.After(to) && !f.start.Add(f.stall).Before(from) {
			return true
		}
	}
	return false
}

// redis reports whether a Redis fault (restartOnly: a restart) touches
// [from, to].
func (ix faultIndex) redis(from, to time.Time, restartOnly bool) bool {
	for _, f := range ix.touching(span{ws: -1, owner: -1, entry: -1, from: from, to: to}) {
		if f.scope == scopeAll && (!restartOnly || f.kind == "redis_restart") {
			return true
		}
	}
	return false
}

// spanOf is the call's span: its workspace, owner and entry broker, from
// sent to answered.
func (r *run) spanOf(rec record) span {
	w := r.topo.spaces[rec.ws]
	return span{ws: w.idx, owner: w.owner, entry: int(rec.entry), from: r.start.Add(rec.sent), to: r.start.Add(rec.done)}
}

// cancelDue says whether the client the call reached must have got its
// tool_cancel: the call reached it, no fault touched the call, and the
// call was given up on (it timed out, or the client misbehaved).
func (r *run) cancelDue(rec record, seq int, delivered map[uint64]int16, touched bool) bool {
	_, reached := delivered[uint64(seq)]
	return reached && !touched && (rec.act.misbehaves() || r.outcomes[rec.outcome] == "timeout")
}

// awaitCancels waits, up to bound, for the tool_cancel reports the final
// check will ask for. A call that timed out in the run's last moments has
// its answer back before its client has reported the tool_cancel that
// went out with it; checking at once would call that missing.
func (r *run) awaitCancels(bound time.Duration) {
	ix := newFaultIndex(r.faults.all())
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		r.mu.Lock()
		missing := 0
		for seq, rec := range r.records {
			if _, reached := r.delivered[uint64(seq)]; !reached || !rec.finished || r.cancels[uint64(seq)] {
				continue // no cancel due, or in: no fault lookup needed
			}
			if r.cancelDue(rec, seq, r.delivered, len(ix.touching(r.spanOf(rec))) > 0) {
				missing++
			}
		}
		r.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-r.cancelled:
		case <-timer.C:
			return
		}
	}
}

// verdict is what the final checks found, for the summary.
type verdict struct {
	clean, cleanFailed, touched int
	maxLate                     time.Duration
	delivered, replies          int
	disconnects                 int
	cancelsDue, cancelsSeen     int
	lateExcused                 int // late answers the host's stalls account for
	asyncLateRedis              int // late async outcomes a Redis fault accounts for
	asyncLost                   int // async records a Redis restart lost
	redeliveredLost             int // async calls delivered again after a Redis restart lost them
}

// check runs the final checks over the records, the fault log, the
// deliveries, the spy's counts and the connection logs, adding what
// breaks an invariant to r.violations.
func (r *run) check(stopped time.Time) verdict {
	faults := r.faults.all()
	ix := newFaultIndex(faults)
	var v verdict
	for _, f := range faults {
		if f.failed != "" {
			r.violate(violation{kind: "no_recovery", at: f.end, detail: fmt.Sprintf("%s on %s (started %s) did not heal: %s", f.kind, f.target, f.start.Format("15:04:05.000"), f.failed)})
		}
	}
	// Copies: clients and the spy may still report late arrivals while the
	// verdict reads (the race detector saw the spy write replies meanwhile).
	r.mu.Lock()
	records := slices.Clone(r.records)
	delivered, again, replies, cancels := maps.Clone(r.delivered), maps.Clone(r.again), maps.Clone(r.replies), maps.Clone(r.cancels)
	r.mu.Unlock()
	for seq, rec := range records {
		if !rec.finished {
			r.violate(violation{kind: "no_answer", seq: uint64(seq), hasSeq: true, detail: "the call never returned"})
			continue
		}
		w := r.topo.spaces[rec.ws]
		s := r.spanOf(rec)
		async := rec.way == wayAsync
		if async && (r.outcomes[rec.outcome] == protocol.CodeCallNotFound || rec.flags&(flagLost|flagRecreated) != 0) {
			until := s.to
			if rec.flags&(flagLost|flagRecreated) != 0 {
				until = r.start.Add(rec.checked)
			}
			switch {
			case ix.redis(s.from, until, true):
				v.asyncLost++
			case rec.flags&flagRecreated != 0:
				r.violate(violation{kind: "two_finals", seq: uint64(seq), hasSeq: true, at: until,
					detail: fmt.Sprintf("a keyed submit sent again after the outcome made the async call to %s anew by %s, with no Redis restart since it was sent", w.id, until.Format("15:04:05.000"))})
			default:
				r.violate(violation{kind: "record_lost", seq: uint64(seq), hasSeq: true, at: until,
					detail: fmt.Sprintf("the record of the async call to %s was gone by %s (outcome %s) with no Redis restart since it was sent", w.id, until.Format("15:04:05.000"), r.outcomes[rec.outcome])})
			}
		}
		if late := rec.done - rec.sent - rec.timeout; late > lateBound {
			switch {
			case ix.stalled(s.from.Add(rec.timeout), s.to):
				v.lateExcused++
			case async && ix.redis(s.from.Add(rec.timeout), s.to, false):
				v.asyncLateRedis++
			default:
				r.violate(violation{kind: "late_answer", seq: uint64(seq), hasSeq: true, at: s.to,
					detail: fmt.Sprintf("answered %s after its %s deadline (%s)", late.Round(time.Millisecond), rec.timeout, r.outcomes[rec.outcome])})
			}
		} else {
			v.maxLate = max(v.maxLate, late)
		}
		touched := len(ix.touching(s)) > 0
		if r.cancelDue(rec, seq, delivered, touched) {
			v.cancelsDue++
			if cancels[uint64(seq)] {
				v.cancelsSeen++
			} else {
				r.violate(violation{kind: "no_tool_cancel", seq: uint64(seq), hasSeq: true, at: s.to,
					detail: fmt.Sprintf("the call reached client %s and ended %s (%s), but the client got no tool_cancel", w.id, r.outcomes[rec.outcome], rec.act)})
			}
		}
		if rec.act.misbehaves() || touched {
			v.touched++
			continue
		}
		v.clean++
		if rec.outcome != 0 {
			v.cleanFailed++
			r.violate(violation{kind: "clean_call_failed", seq: uint64(seq), hasSeq: true, at: s.to,
				detail: fmt.Sprintf("no fault touched it, yet it ended %s (%s call to %s, owner %s, timeout %s, after %s)",
					r.outcomes[rec.outcome], rec.way, w.id, r.topo.brokers[w.owner].name, rec.timeout, (rec.done - rec.sent).Round(time.Millisecond))})
		}
	}
	for seq, ws := range again {
		if seq < uint64(len(records)) && records[seq].finished && records[seq].way == wayAsync {
			if s := r.spanOf(records[seq]); ix.redis(s.from, s.to, true) {
				v.redeliveredLost++
				continue
			}
		}
		r.violate(violation{kind: "delivered_twice", seq: seq, hasSeq: true,
			detail: fmt.Sprintf("the call reached client %s and then %s", r.topo.spaces[delivered[seq]].id, r.topo.spaces[ws].id)})
	}
	for seq, ws := range delivered {
		v.delivered++
		if seq < uint64(len(records)) && records[seq].finished && records[seq].ws != ws {
			r.violate(violation{kind: "delivered_elsewhere", seq: seq, hasSeq: true,
				detail: fmt.Sprintf("the call to %s reached client %s", r.topo.spaces[records[seq].ws].id, r.topo.spaces[ws].id)})
		}
	}
	for seq, n := range replies {
		v.replies += int(n)
		if n > 1 {
			r.violate(violation{kind: "answered_twice", seq: seq, hasSeq: true, detail: fmt.Sprintf("%d answers were published to the caller's inbox", n)})
		}
	}
	for _, w := range r.topo.spaces {
		for _, ev := range w.conns.snapshot() {
			if ev.up || ev.at.Before(r.start) || ev.at.After(stopped) {
				continue
			}
			v.disconnects++
			explained := false
			for _, f := range faults {
				explained = explained || f.explains(w.idx, w.owner, ev.at)
			}
			if !explained {
				r.violate(violation{kind: "unexplained_disconnect", at: ev.at,
					detail: fmt.Sprintf("workspace %s lost its connection at %s (%s) with no fault on it or its broker", w.id, ev.at.Format("15:04:05.000"), ev.reason)})
			}
		}
	}
	return v
}
