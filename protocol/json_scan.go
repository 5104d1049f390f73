package protocol

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
)

// A validating JSON codec for the few message shapes on the broker's hot
// path. encoding/json reads every message two or three times (checkValid,
// the reflective decode, then json.Marshal compacting each json.RawMessage
// again); here one pass validates and decodes, and encoding copies RawMessage
// fields, which came out of this validating decoder, without parsing them
// again. Whatever is unusual (escaped or non-ASCII keys, strings with escapes
// or invalid UTF-8) goes to encoding/json, so the answer stays its answer.
//
// What it earns, against encoding/json for every message
// (TETHER_TUNING=no-fastjson, json_plain.go; make bench-peers, 2026-12-04,
// one instance, medians of three rounds' ratios): without it the broker
// made 0.77x (c=1) and 0.65x (c=64) the calls per CPU-second, at 0.96x
// and 1.39x the p99.
//
// The codec's files: json_scan.go (this one) checks JSON text in one pass
// without building anything, for Valid and SplitArray and for the object
// decoder (json_object.go) that the message decoders (decode_toolcall.go,
// decode_busmessage.go, decode_toolresponse.go) walk; encode_messages.go
// writes the messages with the value writers of json_append.go.

// maxDepth is encoding/json's nesting limit: it rejects deeper input, so we
// do too.
const maxDepth = 10000

// syntaxError is what the fast codec reports; offset counts bytes into the
// input. Callers wrap it; nothing branches on its text.
type syntaxError struct {
	msg    string
	offset int
}

func (e *syntaxError) Error() string {
	return "json: " + e.msg + " at offset " + strconv.Itoa(e.offset)
}

func errAt(b []byte, i int, context string) error {
	if i >= len(b) {
		return &syntaxError{"unexpected end of JSON input", i}
	}
	return &syntaxError{"invalid character " + quoteByte(b[i]) + " " + context, i}
}

func quoteByte(c byte) string { return strconv.Quote(string([]byte{c})) }

// Valid reports whether b is one JSON value with optional surrounding
// whitespace. It answers exactly as json.Valid does, nesting limit included.
func Valid(b []byte) bool {
	if !fast {
		return json.Valid(b)
	}
	i := skipSpace(b, 0)
	end, err := scanValue(b, i, 0)
	return err == nil && skipSpace(b, end) == len(b)
}

// SplitArray returns the elements of the JSON array b, each without the
// whitespace around it. It accepts what json.Unmarshal accepts into a
// []json.RawMessage (b is validated in full, nested values included) except
// null, which is not an array. The elements alias b, with their capacity cut
// at their end so that appending to one cannot overwrite b. An empty array
// gives an empty, non-nil slice.
func SplitArray(b []byte) ([]json.RawMessage, error) {
	if !fast {
		return plainSplitArray(b)
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, errAt(b, i, "looking for beginning of array")
	}
	elems := make([]json.RawMessage, 0, 4)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		i++
	} else {
		for {
			end, err := scanValue(b, i, 1)
			if err != nil {
				return nil, err
			}
			elems = append(elems, json.RawMessage(b[i:end:end]))
			i = skipSpace(b, end)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			return nil, errAt(b, i, "after array element")
		}
	}
	if i = skipSpace(b, i); i != len(b) {
		return nil, errAt(b, i, "after top-level value")
	}
	return elems, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanValue checks the JSON value starting at b[i] and returns the index just
// after it. depth is the number of arrays and objects around the value.
func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errAt(b, i, "")
	}
	if c := b[i]; c == '{' || c == '[' {
		return scanNested(b, i, depth)
	}
	return scanScalar(b, i)
}

func scanScalar(b []byte, i int) (int, error) {
	switch c := b[i]; c {
	case '"':
		end, _, _, err := scanString(b, i)
		return end, err
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		if c == '-' || isDigit(c) {
			return scanNumber(b, i)
		}
		return i, errAt(b, i, "looking for beginning of value")
	}
}

// scanNested checks the object or array at b[i]. It loops instead of
// recursing, keeping the open brackets in a byte stack, so that 10000 levels
// cost 10 KB, not 10000 stack frames.
func scanNested(b []byte, i, depth int) (int, error) {
	var buf [64]byte
	open := buf[:0] // '{' or '[' of each container not yet closed
	var err error
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return i, errAt(b, i, "")
		}
		if c := b[i]; c == '{' || c == '[' {
			if depth+len(open) >= maxDepth {
				return i, &syntaxError{"exceeded max depth", i}
			}
			open = append(open, c)
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == c+2 { // '}' or ']': empty
				i++
				open = open[:len(open)-1]
			} else if c == '{' {
				if i, err = scanKey(b, i); err != nil {
					return i, err
				}
				continue
			} else {
				continue
			}
		} else if i, err = scanScalar(b, i); err != nil {
			return i, err
		}
		// After a value: close containers until a comma starts the next one.
		for {
			if len(open) == 0 {
				return i, nil
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, errAt(b, i, "")
			}
			top := open[len(open)-1]
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if top == '{' {
					if i, err = scanKey(b, i); err != nil {
						return i, err
					}
				}
				break
			}
			if b[i] != top+2 {
				if top == '{' {
					return i, errAt(b, i, "after object key:value pair")
				}
				return i, errAt(b, i, "after array element")
			}
			i++
			open = open[:len(open)-1]
		}
	}
}

// scanKey checks an object key and its colon at b[i] and returns the index
// of the member's value.
func scanKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return i, errAt(b, i, "looking for beginning of object key string")
	}
	i, _, _, err := scanString(b, i)
	if err != nil {
		return i, err
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, errAt(b, i, "after object key")
	}
	return skipSpace(b, i+1), nil
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// stopsString reports whether any of the 8 bytes in x is a quote, a
// backslash or a control character (the classic has-zero-byte and
// has-less-than tricks; they never miss a byte).
func stopsString(x uint64) bool {
	q := x ^ (lsb * '"')
	s := x ^ (lsb * '\\')
	return ((q-lsb)&^q|(s-lsb)&^s|(x-lsb*0x20)&^x)&msb != 0
}

// scanString checks the string starting at b[i] == '"' and returns the index
// after its closing quote, whether it holds an escape, and whether it holds a
// byte of 0x80 or more (so that it needs a UTF-8 check before string(b)).
// Like encoding/json it does not require valid UTF-8.
func scanString(b []byte, i int) (end int, escaped, nonASCII bool, err error) {
	i++
	var seen uint64 // every plain byte ORed in, for nonASCII
	for {
		for len(b)-i >= 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			if stopsString(x) {
				break
			}
			seen |= x
			i += 8
		}
		for i < len(b) {
			c := b[i]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			seen |= uint64(c)
			i++
		}
		if i >= len(b) {
			return i, escaped, false, errAt(b, i, "")
		}
		switch b[i] {
		case '"':
			return i + 1, escaped, seen&msb != 0, nil
		case '\\':
			escaped = true
			if i+1 >= len(b) {
				return i + 1, escaped, false, errAt(b, i+1, "")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				i += 2
				for k := 0; k < 4; k++ {
					if i >= len(b) || !isHex(b[i]) {
						return i, escaped, false, errAt(b, i, "in \\u hexadecimal character escape")
					}
					i++
				}
			default:
				return i + 1, escaped, false, errAt(b, i+1, "in string escape code")
			}
		default:
			return i, escaped, false, errAt(b, i, "in string literal")
		}
	}
}

func isHex(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// scanNumber checks the number at b[i] (a '-' or a digit) against JSON's
// grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, errAt(b, i, "in numeric literal")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, errAt(b, i, "after decimal point in numeric literal")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, errAt(b, i, "in exponent of numeric literal")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	k := 0
	for k < len(lit) && i+k < len(b) && b[i+k] == lit[k] {
		k++
	}
	return i + k, errAt(b, i+k, "in literal "+lit)
}
