package store

import (
	"sync"
	"time"
)

// watchers are the Watch registrations of one store instance, by
// correlation id. Both implementations use them: Memory notifies from
// Finish and Sweep, Redis from its own Finish (with the record) and from
// its subscription to its outcome channel (without), on which the other
// instances' Finish and every Sweep tell it (never its own Finish).
//
// Concurrency: safe for concurrent use; notify never blocks. A channel is
// taken out of the map under the lock before it is sent to, so it gets one
// value, into its room for one.
type watchers struct {
	mu   sync.Mutex
	byID map[string]map[chan Record]struct{}
	// pending are the calls this instance recorded (Redis) whose outcome
	// it has not heard of: notify forgets them, under mu, so that a Watch
	// registered before Pending looks fires on the outcome (see
	// Redis.Pending).
	pending map[string]pendingCall
}

// pendingCall is a call recorded here, to be forgotten at until at the
// latest (its deadline plus grace: by then the sweep ended it).
type pendingCall struct {
	rec   Record
	until time.Time
}

// pendingMax bounds the pending calls kept; past it the map starts anew
// (the ones forgotten are read from the store instead).
const pendingMax = 1 << 16

// remember keeps rec, a call recorded here and not final, until until.
func (ws *watchers) remember(rec Record, until time.Time) {
	rec.Payload = nil // not part of what a status shows
	ws.mu.Lock()
	if ws.pending == nil || len(ws.pending) >= pendingMax {
		ws.pending = make(map[string]pendingCall)
	}
	ws.pending[rec.CorrelationID] = pendingCall{rec: rec, until: until}
	ws.mu.Unlock()
}

// known returns the pending call cid, unless its time is over at now.
func (ws *watchers) known(cid string, now time.Time) (Record, bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	p, ok := ws.pending[cid]
	if !ok || !now.Before(p.until) {
		return Record{}, false
	}
	return p.rec.clone(), true
}

func (ws *watchers) add(cid string) (<-chan Record, func()) {
	ch := make(chan Record, 1)
	ws.mu.Lock()
	if ws.byID == nil {
		ws.byID = make(map[string]map[chan Record]struct{})
	}
	set := ws.byID[cid]
	if set == nil {
		set = make(map[chan Record]struct{})
		ws.byID[cid] = set
	}
	set[ch] = struct{}{}
	ws.mu.Unlock()
	return ch, func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if set := ws.byID[cid]; set != nil {
			delete(set, ch)
			if len(set) == 0 {
				delete(ws.byID, cid)
			}
		}
	}
}

// notify sends rec (the final record, or an empty one: read it again) to
// every watch of cid and forgets them.
func (ws *watchers) notify(cid string, rec Record) {
	ws.mu.Lock()
	set := ws.byID[cid]
	delete(ws.byID, cid)
	delete(ws.pending, cid)
	ws.mu.Unlock()
	for ch := range set {
		ch <- rec.clone() // each its own copy; room for one, sent once
	}
}
