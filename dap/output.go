//go:build !windows

package dap

import "sync"

// outputBuffer keeps the last max bytes of a session's output, addressed by
// absolute offsets so a poller never sees the same byte twice. Safe for
// concurrent use.
type outputBuffer struct {
	mu   sync.Mutex
	max  int
	base int64 // absolute offset of b[0]
	b    []byte
}

func newOutputBuffer(max int) *outputBuffer { return &outputBuffer{max: max} }

func (o *outputBuffer) write(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b = append(o.b, s...)
	if over := len(o.b) - o.max; over > 0 {
		o.b = append(o.b[:0], o.b[over:]...)
		o.base += int64(over)
	}
}

// read returns the output from off (clamped to what is kept), where it
// starts, and the offset after it.
func (o *outputBuffer) read(off int64) (string, int64, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	end := o.base + int64(len(o.b))
	if off < o.base {
		off = o.base
	}
	if off > end {
		off = end
	}
	return string(o.b[off-o.base:]), off, end
}

// Output returns the captured output from offset.
func (s *Session) Output(offset int64) *OutputResult {
	text, from, next := s.out.read(offset)
	st, _, _, _ := s.snapshotState()
	return &OutputResult{SessionID: s.id, Output: text, Offset: from, NextOffset: next, State: st}
}
