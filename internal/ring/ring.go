// Package ring keeps the recent output of a running command for readers
// that poll by offset: the terminal's async sessions and transcript, and
// the sandbox's exec sessions. Offsets count every byte ever written, so
// a reader that asks from its last next offset never loses or repeats a
// byte while the ring holds it, and learns how many it missed when not.
package ring

import (
	"fmt"
	"unicode/utf8"
)

// Ring keeps the most recent size bytes of a stream and counts every byte
// ever written, so a byte's offset stays meaningful after the ring has
// dropped it. Its buffer grows with what is written, up to size: most
// sessions print a few lines, and an ended session's ring is kept for a
// while (keepEnded), so a megabyte allocated up front for each would hold
// a hundred megabytes for nothing. It is not safe for concurrent use; its
// owner guards it.
type Ring struct {
	// buf holds byte offset o at buf[o%size]; until the ring is full
	// len(buf) == total.
	buf   []byte
	size  int64
	total int64 // bytes ever written
}

// New returns a Ring that keeps size bytes (at least one).
func New(size int) *Ring {
	if size < 1 {
		size = 1
	}
	return &Ring{size: int64(size)}
}

// Write appends p, overwriting the oldest bytes once the ring is full.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	size := r.size
	if r.total+int64(n) <= size {
		r.buf = append(r.buf, p...)
		r.total += int64(n)
		return n, nil
	}
	if int64(len(r.buf)) < size {
		full := make([]byte, size)
		copy(full, r.buf)
		r.buf = full
	}
	start := r.total
	r.total += int64(n)
	if int64(len(p)) > size {
		start += int64(len(p)) - size
		p = p[int64(len(p))-size:]
	}
	pos := start % size
	k := copy(r.buf[pos:], p)
	copy(r.buf, p[k:])
	return n, nil
}

// Total is the number of bytes ever written.
func (r *Ring) Total() int64 { return r.total }

// Oldest is the offset of the oldest byte the ring still holds.
func (r *Ring) Oldest() int64 {
	if r.total > r.size {
		return r.total - r.size
	}
	return 0
}

// ReadAt returns up to limit bytes starting at offset from, or at the
// oldest byte still held when from has been dropped; start is the offset
// of the first byte returned. from must not exceed Total.
func (r *Ring) ReadAt(from int64, limit int) (p []byte, start int64) {
	if old := r.Oldest(); from < old {
		from = old
	}
	end := r.total
	if limit >= 0 && end-from > int64(limit) {
		end = from + int64(limit)
	}
	if end <= from {
		return nil, from
	}
	size := r.size
	out := make([]byte, 0, end-from)
	a, b := from%size, end%size
	if a < b || b == 0 {
		if b == 0 {
			b = size
		}
		out = append(out, r.buf[a:b]...)
	} else {
		out = append(out, r.buf[a:]...)
		out = append(out, r.buf[:b]...)
	}
	return out, from
}

// Chunk is a poll's read: up to limit bytes from offset, which must lie
// in [0, Total] (an error says otherwise), from the oldest byte held when
// offset was dropped. While the stream may go on (open) or more bytes
// follow the chunk, it never ends inside a UTF-8 sequence, since JSON
// would turn the halves into U+FFFD; start is the offset of p[0].
func (r *Ring) Chunk(offset int64, limit int, open bool) (p []byte, start int64, err error) {
	if offset < 0 || offset > r.total {
		return nil, 0, fmt.Errorf("offset %d is outside the %d bytes produced", offset, r.total)
	}
	p, start = r.ReadAt(offset, limit)
	if start+int64(len(p)) < r.total || open {
		p = trimPartialRune(p)
	}
	return p, start, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence from the end of p.
func trimPartialRune(p []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(p); i++ {
		b := p[len(p)-i]
		if b < utf8.RuneSelf {
			return p
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(p[len(p)-i:]) {
				return p[:len(p)-i]
			}
			return p
		}
	}
	return p
}
