//go:build !windows

package terminal

// Hooks for the black-box tests in package terminal_test, which fuzz the
// parsers of outside input without reaching into the package otherwise.

// ResolveCwd exposes resolveCwd.
func ResolveCwd(root, cwd string) (string, error) { return resolveCwd(root, cwd) }

// ScanSentinels feeds chunks to a fresh sentinel scanner and returns the
// data it passed through and each marker as "nonce;code" with its raw
// bytes.
func ScanSentinels(chunks ...[]byte) (data []byte, markers []string, raw []byte) {
	var s sentinelScanner
	out := func(b []byte) { data = append(data, b...); raw = append(raw, b...) }
	for _, c := range chunks {
		s.feed(c, out, func(m marker) {
			markers = append(markers, m.nonce+";"+itoa(m.code))
			raw = append(raw, m.raw...)
		})
	}
	s.flush(out)
	return data, markers, raw
}

// CapOutput writes chunks to a head-and-tail capture of limit bytes.
func CapOutput(limit int, chunks ...[]byte) (string, bool) {
	c := newHeadTail(limit)
	for _, p := range chunks {
		_, _ = c.Write(p)
	}
	return c.String()
}

// RingRead writes chunks to a ring of size bytes and reads from offset.
func RingRead(size int, from int64, limit int, chunks ...[]byte) (p []byte, start, total int64) {
	r := newRing(size)
	for _, c := range chunks {
		_, _ = r.Write(c)
	}
	p, start = r.ReadAt(from, limit)
	return p, start, r.Total()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
