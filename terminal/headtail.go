//go:build !windows

package terminal

import (
	"fmt"
	"unicode/utf8"
)

// headTail captures a command's output up to a limit, keeping the first and
// the last half of it when the output is longer: the head usually says what
// started and the tail how it ended. Not safe for concurrent use.
type headTail struct {
	limit int
	head  []byte
	tail  *ring
}

func newHeadTail(limit int) *headTail {
	if limit < 2 {
		limit = 2
	}
	h := limit / 2
	return &headTail{limit: limit, head: make([]byte, 0, h), tail: newRing(limit - h)}
}

func (c *headTail) Write(p []byte) (int, error) {
	n := len(p)
	if room := cap(c.head) - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		_, _ = c.tail.Write(p)
	}
	return n, nil
}

// Total is the number of bytes written.
func (c *headTail) Total() int64 { return int64(len(c.head)) + c.tail.Total() }

// String returns the captured text. When bytes were dropped it joins head
// and tail with a marker saying how many, cutting only between UTF-8
// sequences, and reports truncated.
func (c *headTail) String() (s string, truncated bool) {
	tail, _ := c.tail.ReadAt(0, -1)
	if c.tail.Oldest() == 0 {
		return string(c.head) + string(tail), false
	}
	head := c.head
	// Back off an incomplete sequence at the end of the head and skip
	// continuation bytes at the start of the tail.
	for i := 1; i <= utf8.UTFMax && i <= len(head); i++ {
		b := head[len(head)-i]
		if b < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(head[len(head)-i:]) {
				head = head[:len(head)-i]
			}
			break
		}
	}
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	omitted := c.Total() - int64(len(head)) - int64(len(tail))
	return fmt.Sprintf("%s\n[... %d bytes omitted ...]\n%s", head, omitted, tail), true
}
