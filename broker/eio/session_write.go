package eio

import "errors"

// The write side of a session: frames for the client wait in a queue that
// a writer goroutine empties, started only while frames wait; WriteNow is
// for the few frames written outside the queue. Frames never interleave.

// Why a frame was not queued.
var (
	ErrClosed  = errors.New("session closed")
	ErrBacklog = errors.New("client is not reading its socket")
)

// WriteNow writes one frame directly, outside the queue (the open packet,
// a CONNECT_ERROR, the last words before a close). coder/websocket
// serialises concurrent writers, so frames never interleave with the
// queue's. The transport bounds the write by the write timeout, and
// closing the socket unblocks a stuck write anyway.
func (s *Session) WriteNow(frame []byte) error { return s.tr.write(frame) }

// Send queues a frame for the client; a writer goroutine writes it. It
// never blocks; it fails when the session is closed (ErrClosed) or its
// queue is full (ErrBacklog: a client that does not read).
func (s *Session) Send(frame []byte) error {
	s.mu.Lock()
	err := s.enqueueLocked(frame)
	start := s.kickLocked()
	s.mu.Unlock()
	if start {
		s.startWriter()
	}
	return err
}

// Queue queues a frame for the client without starting a writer: the
// caller calls WriteQueued once it holds no lock of its own. It lets a
// frame be queued in the same critical section of the caller's that
// records it (a call in its connection's table), under the lock order:
// the caller's lock, then the session's. It fails as Send does.
func (s *Session) Queue(frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueueLocked(frame)
}

// WriteQueued writes what waits in the queue on the calling goroutine,
// unless a writer runs already, and returns once the queue is empty: a
// call's frame costs no goroutine handoff at low load.
func (s *Session) WriteQueued() {
	s.mu.Lock()
	start := s.kickLocked()
	s.mu.Unlock()
	if start {
		s.writeQueued()
	}
}

// Release puts first (the CONNECT ack) at the head of the queue, ahead of
// any frame queued since the session began, and lets the writer run; the
// connect deadline stops. false when the session is closed.
func (s *Session) Release(first []byte) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.queue = append([][]byte{first}, s.queue...)
	s.held = false
	if s.connectTimer != nil {
		s.connectTimer.Stop()
		s.connectTimer = nil
	}
	start := s.kickLocked()
	s.mu.Unlock()
	if start {
		s.startWriter()
	}
	return true
}

// enqueueLocked adds a frame to the outgoing queue; mu is held.
func (s *Session) enqueueLocked(frame []byte) error {
	switch {
	case s.closed:
		return ErrClosed
	case len(s.queue) >= s.srv.cfg.MaxQueue:
		return ErrBacklog
	}
	s.queue = append(s.queue, frame)
	return nil
}

// kickLocked starts the writer if frames wait and none runs. It returns
// whether the caller must start it (outside the lock).
func (s *Session) kickLocked() bool {
	if s.writing || s.held || s.closed || len(s.queue) == 0 {
		return false
	}
	s.writing = true
	return true
}

// startWriter runs writeQueued on a goroutine of the server's wait group;
// call it when kickLocked says so.
func (s *Session) startWriter() { s.srv.wg.Go(s.writeQueued) }

// writeQueued is the writer: it writes the queued frames, batch by batch
// and never under mu, until the queue is empty, then stops being the
// writer. It runs on startWriter's goroutine, or on WriteQueued's.
func (s *Session) writeQueued() {
	for {
		s.mu.Lock()
		if s.closed || len(s.queue) == 0 {
			s.writing = false
			s.mu.Unlock()
			return
		}
		batch := s.queue
		s.queue = s.spare[:0]
		s.mu.Unlock()
		// The whole batch in one write to the socket where the transport
		// can (a WebSocket's sock, sock.go).
		if err := s.tr.write(batch...); err != nil {
			s.Log(s.srv.log.Debug()).Err(err).Msg("write failed")
			s.mu.Lock()
			s.writing = false
			s.mu.Unlock()
			s.Close(ReasonTransport, false)
			return
		}
		clear(batch)
		s.mu.Lock()
		s.spare = batch[:0]
		s.mu.Unlock()
	}
}
