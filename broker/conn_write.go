package broker

// The write side of a connection: frames for the client wait in a queue that
// a writer goroutine empties, started only while frames wait; writeNow is
// for the few frames written outside the queue. Frames never interleave.

// writeNow writes one frame directly. coder/websocket serialises concurrent
// writers, so frames never interleave with the queue's. The transport
// bounds the write by the write timeout, and closing the socket unblocks a
// stuck write anyway.
func (c *conn) writeNow(frame []byte) error { return c.tr.write(frame) }

func (c *conn) send(frame []byte) bool {
	c.mu.Lock()
	ok := c.enqueueLocked(frame)
	start := c.kickLocked()
	c.mu.Unlock()
	if start {
		c.startWriter()
	}
	return ok
}

// enqueueLocked adds a frame to the outgoing queue; c.mu is held. It never
// blocks; it returns false when the connection is closed or its queue is
// full (a client that does not read).
func (c *conn) enqueueLocked(frame []byte) bool {
	if c.closed || len(c.queue) >= c.b.cfg.MaxInFlight+64 {
		return false
	}
	c.queue = append(c.queue, frame)
	return true
}

// kickLocked starts the writer if frames wait and none runs. It returns
// whether the caller must start it (outside the lock).
func (c *conn) kickLocked() bool {
	if c.writing || c.connectAckDue || c.closed || len(c.queue) == 0 {
		return false
	}
	c.writing = true
	return true
}

// startWriter runs writeQueued on a goroutine of the broker's wait group;
// call it when kickLocked says so.
func (c *conn) startWriter() { c.b.wg.Go(c.writeQueued) }

// writeQueued is the writer: it writes the queued frames, batch by batch
// and never under mu, until the queue is empty, then stops being the
// writer. It runs on startWriter's goroutine, or on deliver's, which saves
// the handoff for a call's frame.
func (c *conn) writeQueued() {
	for {
		c.mu.Lock()
		if c.closed || len(c.queue) == 0 {
			c.writing = false
			c.mu.Unlock()
			return
		}
		batch := c.queue
		c.queue = c.spare[:0]
		c.mu.Unlock()
		// The whole batch in one write to the socket where the transport
		// can (a WebSocket's sock, socket.go).
		if err := c.tr.write(batch...); err != nil {
			c.event(c.b.log.Debug()).Err(err).Msg("write failed")
			c.mu.Lock()
			c.writing = false
			c.mu.Unlock()
			c.close(ReasonTransport, false)
			return
		}
		clear(batch)
		c.mu.Lock()
		c.spare = batch[:0]
		c.mu.Unlock()
	}
}
