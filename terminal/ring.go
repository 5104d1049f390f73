//go:build !windows

package terminal

// ring keeps the most recent size bytes of a stream and counts every byte
// ever written, so a byte's offset stays meaningful after the ring has
// dropped it. Its buffer grows with what is written, up to size: most
// sessions print a few lines, and an ended session's ring is kept for a
// while (keepEnded), so a megabyte allocated up front for each would hold
// a hundred megabytes for nothing. It is not safe for concurrent use; the
// session guards it.
type ring struct {
	// buf holds byte offset o at buf[o%size]; until the ring is full
	// len(buf) == total.
	buf   []byte
	size  int64
	total int64 // bytes ever written
}

func newRing(size int) *ring {
	if size < 1 {
		size = 1
	}
	return &ring{size: int64(size)}
}

// Write appends p, overwriting the oldest bytes once the ring is full.
func (r *ring) Write(p []byte) (int, error) {
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
func (r *ring) Total() int64 { return r.total }

// Oldest is the offset of the oldest byte the ring still holds.
func (r *ring) Oldest() int64 {
	if r.total > r.size {
		return r.total - r.size
	}
	return 0
}

// ReadAt returns up to limit bytes starting at offset from, or at the
// oldest byte still held when from has been dropped; start is the offset
// of the first byte returned. from must not exceed Total.
func (r *ring) ReadAt(from int64, limit int) (p []byte, start int64) {
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
