package broker

import "github.com/tetherdev/tether/broker/api"

// HandsOverForTest reports whether a submit for ws would be handed to this
// broker's connection holding it now (holderForSubmit): the connection is
// done joining and no drain of its queue runs. The connect-time drain may
// not have started yet: tests that need it over wait for its claim first.
func HandsOverForTest(b *Broker, ws string) bool {
	c, _ := b.localHolderReady(ws, true)
	return c != nil
}

// DrainWaitsForTest counts the submits waiting for a holder's drain to
// end before they are handed over (holderForSubmit).
func DrainWaitsForTest(b *Broker) int { return int(b.drainWaits.Load()) }

// KeptCallsForTest counts the calls the connection holding ws keeps while
// it joins (keepEarly): before its takeover came back and, rejoining, after.
func KeptCallsForTest(b *Broker, ws string) int {
	b.mu.Lock()
	c := b.holders[ws]
	b.mu.Unlock()
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.early) + len(c.later)
}

// CallsServedForTest counts the requests s's call server answered itself
// (the rest went to net/http).
func CallsServedForTest(s *api.Server) int64 { return s.Served() }

// InFlightForTest counts the calls in the pending tables of b's
// connections.
func InFlightForTest(b *Broker) int { return b.inFlight() }
