package ring

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestRingGrowsWithItsOutput: a ring holds what it was given, not its whole
// size, until it is full (the e2e session loop: every async session held a
// megabyte from its start, and a hundred ended ones are kept).
func TestRingGrowsWithItsOutput(t *testing.T) {
	r := New(1 << 20)
	_, _ = r.Write([]byte("done\n"))
	if c := cap(r.buf); c > 64 {
		t.Fatalf("a ring of 1 MB holding 5 bytes has a %d byte buffer", c)
	}
	if got, start := r.ReadAt(0, -1); string(got) != "done\n" || start != 0 {
		t.Fatalf("ReadAt(0) = %q at %d", got, start)
	}
}

// TestRingKeepsTheLastSizeBytesAtTheirOffsets checks reads against the whole
// stream kept aside, across the ring filling up and wrapping, for writes of
// every size.
func TestRingKeepsTheLastSizeBytesAtTheirOffsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 7, 64, 1000} {
		r := New(size)
		var all []byte
		for range 200 {
			p := make([]byte, rng.IntN(3*size/2+2))
			for i := range p {
				p[i] = byte(rng.IntN(256))
			}
			_, _ = r.Write(p)
			all = append(all, p...)
			if r.Total() != int64(len(all)) {
				t.Fatalf("size %d: Total %d, want %d", size, r.Total(), len(all))
			}
			oldest := max(0, len(all)-size)
			if r.Oldest() != int64(oldest) {
				t.Fatalf("size %d: Oldest %d, want %d", size, r.Oldest(), oldest)
			}
			from := rng.IntN(len(all) + 1)
			limit := rng.IntN(size+2) - 1 // -1: no limit
			got, start := r.ReadAt(int64(from), limit)
			wantStart := max(from, oldest)
			want := all[wantStart:]
			if limit >= 0 && len(want) > limit {
				want = want[:limit]
			}
			if start != int64(wantStart) || !bytes.Equal(got, want) {
				t.Fatalf("size %d, %d written: ReadAt(%d, %d) = %d bytes at %d, want %d at %d", size, len(all), from, limit, len(got), start, len(want), wantStart)
			}
			if int64(cap(r.buf)) > 2*int64(size)+8 {
				t.Fatalf("size %d: buffer grew to %d", size, cap(r.buf))
			}
		}
	}
}
