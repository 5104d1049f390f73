package eio

import "testing"

// A heartbeat queue keeps no connection in its backing array once the step
// that named it is popped, compactions included: the full soak found the
// heap of 11,000 closed connections kept after all of them had gone.
func TestHeartbeatQueueKeepsNoConnectionItPopped(t *testing.T) {
	var q hbQueue
	conns := make([]*Session, 3000)
	for i := range conns {
		conns[i] = new(Session)
		q.push(hbStep{s: conns[i], seq: uint32(i)})
	}
	for range 2500 { // past head 1024 and half: compacts
		q.pop()
	}
	live := map[*Session]bool{}
	for _, s := range q.steps[q.head:] {
		live[s.s] = true
	}
	for i, s := range q.steps[:cap(q.steps)] {
		if s.s != nil && !live[s.s] {
			t.Fatalf("slot %d of the backing array still holds a popped connection (seq %d)", i, s.seq)
		}
	}
	for range 500 {
		q.pop()
	}
	for i, s := range q.steps[:cap(q.steps)] {
		if s.s != nil {
			t.Fatalf("empty queue: slot %d still holds a connection (seq %d)", i, s.seq)
		}
	}
}
