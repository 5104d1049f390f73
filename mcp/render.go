package mcp

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text rendering of values that come from the workspace: command output,
// file contents, variable values, paths, error messages. They are untrusted:
// a program can print terminal escapes, NUL bytes, invalid UTF-8,
// bidirectional overrides that make text read differently than it is, or
// megabytes. What reaches the model is valid UTF-8 without any of these, and
// capped; the structured result keeps the value as the workspace sent it.
//
// Hand-written rather than a library: strconv.Quote would escape every
// non-ASCII letter and the quotes, which models then misread as part of the
// value; the rules here are few and fuzzed (FuzzRender).

// line renders s on one line: every control character is escaped (\n, \t,
// \x1b, ...), and s is capped at max bytes with a note of what was cut.
func line(s string, max int) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		piece := escapeRune(r, size, s[i:i+size], false)
		if n+len(piece) > max {
			fmt.Fprintf(&b, "…(+%d bytes)", len(s)-i)
			break
		}
		b.WriteString(piece)
		n += len(piece)
		i += size
	}
	return b.String()
}

// block renders s as lines of text: newlines and tabs are kept (CRLF and
// lone CR become newlines), terminal escape sequences are dropped, other
// control characters escaped. Past max bytes the middle is cut: the head
// and, mostly, the tail (where a failing command says why) are kept.
func block(s string, max int) string {
	clean := cleanBlock(s)
	if len(clean) <= max {
		return clean
	}
	head := cutRunes(clean, max/4)
	tail := tailRunes(clean, max-len(head))
	cut := len(clean) - len(head) - len(tail)
	return head + fmt.Sprintf("\n…[%d bytes not shown; the structured result has the text]…\n", cut) + tail
}

func cleanBlock(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b:
			i += escapeSequenceLen(s[i:])
			continue
		case c == '\r':
			b.WriteByte('\n')
			i++
			if i < len(s) && s[i] == '\n' {
				i++
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteString(escapeRune(r, size, s[i:i+size], true))
		i += size
	}
	return b.String()
}

// escapeRune renders one decoded rune (raw is its bytes in the source).
// keepLines keeps \n and \t as they are.
func escapeRune(r rune, size int, raw string, keepLines bool) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return fmt.Sprintf(`\x%02x`, raw[0])
	case r == '\n':
		if keepLines {
			return "\n"
		}
		return `\n`
	case r == '\t':
		if keepLines {
			return "\t"
		}
		return `\t`
	case r == '\r':
		return `\r`
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r)
	case r >= 0x80 && r < 0xa0, invisible(r):
		return fmt.Sprintf(`\u%04x`, r)
	}
	return raw
}

// invisible reports format characters that change how text reads without
// showing: bidirectional overrides and isolates, zero-width characters, and
// the byte order mark.
func invisible(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
		r == 0x061c, r == 0xfeff, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// escapeSequenceLen is the length of the terminal escape sequence at the
// start of s (s[0] is ESC): CSI (ESC [ … final byte), OSC and the other
// string sequences (ESC ] … BEL or ESC \), or ESC and one character.
func escapeSequenceLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	switch s[1] {
	case '[':
		for i := 2; i < len(s); i++ {
			if s[i] >= 0x40 && s[i] <= 0x7e {
				return i + 1
			}
			if s[i] < 0x20 || s[i] > 0x7e {
				return i // not a CSI after all: drop what came so far
			}
		}
		return len(s)
	case ']', 'P', '^', '_', 'X':
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 {
				return i + 1
			}
			if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
		}
		return len(s)
	}
	_, size := utf8.DecodeRuneInString(s[1:])
	return 1 + size
}

// cutRunes is the longest prefix of s of at most n bytes that ends on a
// rune boundary.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// tailRunes is the longest suffix of s of at most n bytes that starts on a
// rune boundary.
func tailRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Caps of the text views. Big values are cut in the text only.
const (
	maxValue  = 300    // a variable's value, a path, a name
	maxOutput = 16_000 // command output, a file's content, a diff
)
