package store

import "sync"

// watchers are the Watch registrations of one store instance, by
// correlation id. Both implementations use them: Memory notifies from
// Finish and Sweep, Redis from its subscription to the outcome channel.
//
// Concurrency: safe for concurrent use; notify never blocks. A channel is
// taken out of the map under the lock before it is closed, so it is closed
// once.
type watchers struct {
	mu   sync.Mutex
	byID map[string]map[chan struct{}]struct{}
}

func (ws *watchers) add(cid string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	ws.mu.Lock()
	if ws.byID == nil {
		ws.byID = make(map[string]map[chan struct{}]struct{})
	}
	set := ws.byID[cid]
	if set == nil {
		set = make(map[chan struct{}]struct{})
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

// notify closes every channel watching cid and forgets them.
func (ws *watchers) notify(cid string) {
	ws.mu.Lock()
	set := ws.byID[cid]
	delete(ws.byID, cid)
	ws.mu.Unlock()
	for ch := range set {
		close(ch)
	}
}
