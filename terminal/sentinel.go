//go:build !windows

package terminal

import (
	"bytes"
	"strconv"
)

// The visible shell's prompt hook prints this marker after every command
// line: an OSC 633 "D" (command finished) sequence carrying the nonce the
// line was started with and its exit status, the way VS Code's shell
// integration reports completion. Completion is read from the marker,
// never guessed from output.
const (
	markerPrefix = "\x1b]633;D;"
	markerEnd    = '\a'
	maxNonce     = 64
	// maxMarker bounds the body so a stray prefix in output is released as
	// data instead of being held back forever.
	maxMarker = maxNonce + 1 + 3
)

// marker is one parsed sentinel. An empty nonce comes from a prompt
// that no agent command started (a person typing into the terminal).
type marker struct {
	nonce string
	code  int
	raw   []byte
}

// sentinelScanner splits a PTY byte stream into data and markers. A
// marker split across reads is held back until it completes. Feeding the
// same bytes in any chunking yields the same data and markers.
type sentinelScanner struct {
	pending []byte
}

// feed scans p. data receives runs of plain bytes (valid only during the
// call); mark receives each well-formed marker.
func (s *sentinelScanner) feed(p []byte, data func([]byte), mark func(marker)) {
	buf := p
	if len(s.pending) > 0 {
		buf = append(s.pending, p...)
		s.pending = nil
	}
	emit := func(b []byte) {
		if len(b) > 0 {
			data(b)
		}
	}
	start, i := 0, 0
	for i < len(buf) {
		j := bytes.IndexByte(buf[i:], markerPrefix[0])
		if j < 0 {
			break
		}
		i += j
		rest := buf[i:]
		if len(rest) < len(markerPrefix) {
			if bytes.HasPrefix([]byte(markerPrefix), rest) {
				emit(buf[start:i])
				s.pending = append([]byte(nil), rest...)
				return
			}
			i++
			continue
		}
		if !bytes.HasPrefix(rest, []byte(markerPrefix)) {
			i++
			continue
		}
		body := rest[len(markerPrefix):]
		end := bytes.IndexByte(body[:min(len(body), maxMarker+1)], markerEnd)
		if end < 0 {
			if len(body) <= maxMarker {
				emit(buf[start:i])
				s.pending = append([]byte(nil), rest...)
				return
			}
			i++
			continue
		}
		m, ok := parseMarkerBody(body[:end])
		if !ok {
			i++
			continue
		}
		n := len(markerPrefix) + end + 1
		m.raw = rest[:n]
		emit(buf[start:i])
		mark(m)
		i += n
		start = i
	}
	emit(buf[start:])
}

// flush releases bytes held back at the end of the stream as data.
func (s *sentinelScanner) flush(data func([]byte)) {
	if len(s.pending) > 0 {
		data(s.pending)
		s.pending = nil
	}
}

// parseMarkerBody parses "<nonce>;<status>": the nonce is empty or
// alphanumeric, the status a decimal from 0 to 255.
func parseMarkerBody(b []byte) (marker, bool) {
	k := bytes.LastIndexByte(b, ';')
	if k < 0 || k > maxNonce {
		return marker{}, false
	}
	nonce, status := b[:k], b[k+1:]
	for _, c := range nonce {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return marker{}, false
		}
	}
	if len(status) == 0 || len(status) > 3 {
		return marker{}, false
	}
	for _, c := range status {
		if c < '0' || c > '9' {
			return marker{}, false
		}
	}
	code, err := strconv.Atoi(string(status))
	if err != nil || code > 255 {
		return marker{}, false
	}
	return marker{nonce: string(nonce), code: code}, true
}
