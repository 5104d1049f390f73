package broker

// HandsOverForTest reports whether a submit for ws would be handed to this
// broker's connection holding it now (heldForSubmit): the connection is
// done joining and its connect-time queue drain has ended. Tests of the
// held path wait for it instead of guessing when that drain is over.
func HandsOverForTest(b *Broker, ws string) bool { return b.heldForSubmit(ws) != nil }

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
func CallsServedForTest(s *Server) int64 { return s.served.Load() }

// InFlightForTest counts the calls in the pending tables of b's
// connections.
func InFlightForTest(b *Broker) int { return b.inFlight() }
