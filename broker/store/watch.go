package store

import "sync"

// watchers are the Watch registrations of one store instance, by
// correlation id. Both implementations use them: Memory notifies from
// Finish and Sweep, Redis from its own Finish (with the record) and from
// its subscription to the outcome channel (without).
//
// Concurrency: safe for concurrent use; notify never blocks. A channel is
// taken out of the map under the lock before it is sent to, so it gets one
// value, into its room for one.
type watchers struct {
	mu   sync.Mutex
	byID map[string]map[chan Record]struct{}
	// own counts the Finish calls of this instance in progress, by
	// correlation id: the outcome channel's notice of such a call can
	// arrive before the script's reply, and is left to the Finish, which
	// has the record.
	own map[string]int
}

// finishing marks cid as being finished here until the returned func runs.
func (ws *watchers) finishing(cid string) func() {
	ws.mu.Lock()
	if ws.own == nil {
		ws.own = make(map[string]int)
	}
	ws.own[cid]++
	ws.mu.Unlock()
	return func() {
		ws.mu.Lock()
		if ws.own[cid]--; ws.own[cid] <= 0 {
			delete(ws.own, cid)
		}
		ws.mu.Unlock()
	}
}

// notice handles the outcome channel's notice of cid: watchers read the
// record again, unless this instance's own Finish of it is in progress.
func (ws *watchers) notice(cid string) {
	ws.mu.Lock()
	mine := ws.own[cid] > 0
	ws.mu.Unlock()
	if !mine {
		ws.notify(cid, Record{})
	}
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
	ws.mu.Unlock()
	for ch := range set {
		ch <- rec.clone() // each its own copy; room for one, sent once
	}
}
