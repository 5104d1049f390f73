package protocol

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// appendFloat writes f as encoding/json's float64 encoder does (like
// JavaScript: no exponent between 1e-6 and 1e21, exponent without leading
// zeros), and NaN and infinities as null.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	abs := math.Abs(f)
	if f != 0 && abs < 1e15 && f == math.Trunc(f) {
		// What 'f' formatting gives an integer below 2^53, faster; zero
		// takes the long way, which keeps the sign of -0.
		return strconv.AppendInt(dst, int64(f), 10)
	}
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// plainASCII[c] is true for the ASCII bytes json.Marshal copies into a string
// as they are: not the quote, the backslash, control characters, or <, > and
// & (which it escapes for HTML).
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// appendString writes s quoted and escaped exactly as json.Marshal does:
// \uXXXX for <, > and &, \b \f \n \r \t or \u00XX for control characters,
// \ufffd for each byte of invalid UTF-8, and \u2028 and \u2029 escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// stopsRaw reports whether any of the 8 bytes in x is <, >, & or 0xE2 (the
// first byte of U+2028 and U+2029). x|0x02 maps '<' (0x3C) onto '>' (0x3E)
// and no other byte onto it.
func stopsRaw(x uint64) bool {
	a := (x | lsb*0x02) ^ (lsb * '>')
	b := x ^ (lsb * '&')
	e := x ^ (lsb * 0xE2)
	return ((a-lsb)&^a|(b-lsb)&^b|(e-lsb)&^e)&msb != 0
}

// appendRaw copies the valid JSON raw the way json.Marshal writes a
// json.RawMessage without whitespace: with <, >, & and U+2028, U+2029
// escaped. In valid JSON those only occur inside strings, so no parsing is
// needed to find them.
func appendRaw(dst, raw []byte) []byte {
	start, i := 0, 0
	for i < len(raw) {
		stop := len(raw)
		if len(raw)-i >= 8 {
			if !stopsRaw(binary.LittleEndian.Uint64(raw[i:])) {
				i += 8
				continue
			}
			stop = i + 8
		}
		for i < stop {
			switch c := raw[i]; {
			case c == '<' || c == '>' || c == '&':
				dst = append(dst, raw[start:i]...)
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
				i++
				start = i
			case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8:
				dst = append(dst, raw[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[raw[i+2]&0xF])
				i += 3
				start = i
			default:
				i++
			}
		}
	}
	return append(dst, raw[start:]...)
}

// AppendString appends s as a JSON string, quoted and escaped exactly as
// json.Marshal writes it (see appendString), for other packages' hand-
// written encoders.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }
