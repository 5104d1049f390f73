package protocol

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tetherdev/tether/internal/strictjson"
)

// A validating JSON codec for the few message shapes on the broker's hot
// path. encoding/json reads every message two or three times (checkValid,
// the reflective decode, then json.Marshal compacting each json.RawMessage
// again); here one pass validates and decodes, and encoding copies RawMessage
// fields, which came out of this validating decoder, without parsing them
// again. Whatever is unusual (escaped or non-ASCII keys, strings with escapes
// or invalid UTF-8) goes to encoding/json, so the answer stays its answer.

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

// errSlowKey sends a decoder to encoding/json: an escaped or non-ASCII key
// needs its unescaping and Unicode case folding (U+212A KELVIN SIGN matches
// "k") to find its field.
var errSlowKey = errors.New("json: key needs encoding/json")

// Valid reports whether b is one JSON value with optional surrounding
// whitespace. It answers exactly as json.Valid does, nesting limit included.
func Valid(b []byte) bool {
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

// unquote returns the Go string of the checked string token tok, the way
// encoding/json decodes it: as is when it has no escape and is valid UTF-8,
// through json.Unmarshal otherwise (which turns invalid UTF-8 and lone
// surrogates into U+FFFD).
func unquote(tok []byte, escaped, nonASCII bool) (string, error) {
	s := tok[1 : len(tok)-1]
	if !escaped && (!nonASCII || utf8.Valid(s)) {
		return string(s), nil
	}
	var out string
	if err := json.Unmarshal(tok, &out); err != nil {
		return "", err
	}
	return out, nil
}

// objectDecoder walks the members of a top-level JSON object, checking
// everything it passes.
type objectDecoder struct {
	b     []byte
	i     int // at the next member, or at a value after next returned its key
	first bool
}

func openObject(b []byte) (objectDecoder, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return objectDecoder{}, errAt(b, i, "looking for beginning of object")
	}
	return objectDecoder{b: b, i: i + 1, first: true}, nil
}

// next reads the next member's key and colon and leaves d at its value; ok
// is false after the closing brace. A key that encoding/json must match
// returns errSlowKey.
func (d *objectDecoder) next() (key []byte, ok bool, err error) {
	b := d.b
	i := skipSpace(b, d.i)
	if i >= len(b) {
		return nil, false, errAt(b, i, "")
	}
	switch {
	case b[i] == '}':
		d.i = i + 1
		return nil, false, nil
	case d.first:
		d.first = false
	case b[i] == ',':
		i = skipSpace(b, i+1)
	default:
		return nil, false, errAt(b, i, "after object key:value pair")
	}
	if i >= len(b) || b[i] != '"' {
		return nil, false, errAt(b, i, "looking for beginning of object key string")
	}
	end, escaped, nonASCII, err := scanString(b, i)
	if err != nil {
		return nil, false, err
	}
	if escaped || nonASCII {
		return nil, false, errSlowKey
	}
	key = b[i+1 : end-1]
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return nil, false, errAt(b, i, "after object key")
	}
	d.i = skipSpace(b, i+1)
	return key, true, nil
}

// end checks that only whitespace follows the object.
func (d *objectDecoder) end() error {
	if i := skipSpace(d.b, d.i); i != len(d.b) {
		return errAt(d.b, i, "after top-level value")
	}
	return nil
}

func (d *objectDecoder) mismatch(want string) error {
	if d.i >= len(d.b) {
		return errAt(d.b, d.i, "")
	}
	return &syntaxError{"cannot decode value starting with " + quoteByte(d.b[d.i]) + " into " + want, d.i}
}

// null consumes a null at d.i and reports whether there was one (then the
// field keeps its value, as encoding/json leaves it).
func (d *objectDecoder) null() (bool, error) {
	if d.i >= len(d.b) || d.b[d.i] != 'n' {
		return false, nil
	}
	end, err := scanLiteral(d.b, d.i, "null")
	d.i = end
	return true, err
}

func (d *objectDecoder) str(dst *string) error {
	if null, err := d.null(); null || err != nil {
		return err
	}
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return d.mismatch("a string")
	}
	start := d.i
	end, escaped, nonASCII, err := scanString(d.b, start)
	if err != nil {
		return err
	}
	d.i = end
	s, err := unquote(d.b[start:end], escaped, nonASCII)
	if err != nil {
		return err
	}
	*dst = s
	return nil
}

func (d *objectDecoder) boolean(dst *bool) error {
	if null, err := d.null(); null || err != nil {
		return err
	}
	var err error
	switch {
	case d.i < len(d.b) && d.b[d.i] == 't':
		d.i, err = scanLiteral(d.b, d.i, "true")
		*dst = true
	case d.i < len(d.b) && d.b[d.i] == 'f':
		d.i, err = scanLiteral(d.b, d.i, "false")
		*dst = false
	default:
		return d.mismatch("a bool")
	}
	return err
}

// number consumes the number at d.i and returns its token; nil for null.
func (d *objectDecoder) number() ([]byte, error) {
	if null, err := d.null(); null || err != nil {
		return nil, err
	}
	if d.i >= len(d.b) || (d.b[d.i] != '-' && !isDigit(d.b[d.i])) {
		return nil, d.mismatch("a number")
	}
	start := d.i
	end, err := scanNumber(d.b, start)
	if err != nil {
		return nil, err
	}
	d.i = end
	return d.b[start:end], nil
}

func (d *objectDecoder) float(dst *float64) error {
	start := d.i
	tok, err := d.number()
	if tok == nil || err != nil {
		return err
	}
	f, err := parseFloat(tok)
	if err != nil {
		return &syntaxError{"number " + string(tok) + " out of float64 range", start}
	}
	*dst = f
	return nil
}

func (d *objectDecoder) int(dst *int64) error {
	start := d.i
	tok, err := d.number()
	if tok == nil || err != nil {
		return err
	}
	n, err := parseInt(tok)
	if err != nil {
		return &syntaxError{"number " + string(tok) + " is not an int64", start}
	}
	*dst = n
	return nil
}

// raw stores the value's exact bytes, null included, as json.RawMessage's
// UnmarshalJSON does. They alias the input, capacity cut at their end.
func (d *objectDecoder) raw(dst *json.RawMessage) error {
	start := d.i
	end, err := scanValue(d.b, start, 1)
	if err != nil {
		return err
	}
	d.i = end
	*dst = d.b[start:end:end]
	return nil
}

func (d *objectDecoder) skip() error {
	end, err := scanValue(d.b, d.i, 1)
	d.i = end
	return err
}

// parseFloat is strconv.ParseFloat for a checked JSON number token, with a
// shortcut for integers of up to 15 digits, which float64 holds exactly.
func parseFloat(tok []byte) (float64, error) {
	if n, ok := smallInt(tok, 15); ok {
		f := float64(n)
		if tok[0] == '-' && n == 0 {
			f = math.Copysign(0, -1) // "-0" is negative zero, as strconv says
		}
		return f, nil
	}
	return strconv.ParseFloat(string(tok), 64)
}

// parseInt is strconv.ParseInt(tok, 10, 64) for a checked JSON number token:
// a fraction or exponent is an error there, so it is here.
func parseInt(tok []byte) (int64, error) {
	if n, ok := smallInt(tok, 18); ok {
		return n, nil
	}
	return strconv.ParseInt(string(tok), 10, 64)
}

// smallInt parses tok if it is an optional '-' and at most maxDigits digits.
func smallInt(tok []byte, maxDigits int) (int64, bool) {
	digits := tok
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > maxDigits {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(tok) {
		n = -n
	}
	return n, true
}

// keyIs reports whether key selects the field named name (lower case ASCII)
// the way encoding/json matches an ASCII key: exactly or ignoring ASCII case.
// No two of our field names differ only in case, so which of the two matches
// never matters.
func keyIs(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// fieldError names the member whose value failed to decode.
func fieldError(key []byte, err error) error {
	return &fieldErr{key: string(key), err: err}
}

type fieldErr struct {
	key string
	err error
}

func (e *fieldErr) Error() string { return "field " + strconv.Quote(e.key) + ": " + e.err.Error() }
func (e *fieldErr) Unwrap() error { return e.err }

// toolCallField decodes the member key of a ToolCall; known is false for a
// key that is not one of its fields.
func (d *objectDecoder) toolCallField(key []byte, c *ToolCall) (known bool, err error) {
	switch {
	case keyIs(key, "correlation_id"):
		err = d.str(&c.CorrelationID)
	case keyIs(key, "endpoint"):
		err = d.str(&c.Endpoint)
	case keyIs(key, "payload"):
		err = d.raw(&c.Payload)
	case keyIs(key, "timeout"):
		err = d.float(&c.Timeout)
	case keyIs(key, "reply_to"):
		err = d.str(&c.ReplyTo)
	case keyIs(key, "deadline_ms"):
		err = d.int(&c.DeadlineMS)
	case keyIs(key, "wait_for_workspace_ms"):
		err = d.int(&c.WaitForWorkspaceMS)
	case keyIs(key, "async"):
		err = d.boolean(&c.Async)
	case keyIs(key, "idempotency_key"):
		err = d.str(&c.IdempotencyKey)
	default:
		return false, nil
	}
	return true, err
}

// DecodeToolCall decodes the JSON object b into c as json.Unmarshal(b, c)
// would: same fields set (others keep their values), an error whenever
// json.Unmarshal returns one (the text differs). It also rejects a top-level
// null, which json.Unmarshal ignores. Payload aliases b. Members that are
// not ToolCall fields are skipped: a tool_call from a newer broker may
// carry fields this version does not know.
//
// The key loop is written out in each decoder rather than shared through a
// callback: passing the decoder to a func value makes it escape, which costs
// an allocation per message on the hot path.
func DecodeToolCall(b []byte, c *ToolCall) error { return decodeToolCall(b, c, false) }

// callerFields are the members of a caller's call body (POST
// /api/v1/workspaces/{id}/calls): the ToolCall fields but reply_to and
// deadline_ms, which only the broker sets.
var callerFields = []string{"correlation_id", "endpoint", "payload", "timeout", "wait_for_workspace_ms", "async", "idempotency_key"}

// DecodeCallRequest decodes a caller's call body into c as DecodeToolCall
// does, but strictly: a member other than correlation_id, endpoint,
// payload, timeout, wait_for_workspace_ms, async and idempotency_key
// (reply_to and deadline_ms included: the broker sets those) is an error
// that names it and, when one is close, the field it probably meant
// (`unknown field "timout" (did you mean "timeout"?)`).
func DecodeCallRequest(b []byte, c *ToolCall) error { return decodeToolCall(b, c, true) }

func decodeToolCall(b []byte, c *ToolCall, caller bool) error {
	saved := *c
	d, err := openObject(b)
	for err == nil {
		var key []byte
		var ok bool
		if key, ok, err = d.next(); !ok || err != nil {
			break
		}
		if caller && (keyIs(key, "reply_to") || keyIs(key, "deadline_ms")) {
			err = strictjson.UnknownField(string(key), callerFields)
		} else if known, ferr := d.toolCallField(key, c); ferr != nil {
			err = fieldError(key, ferr)
		} else if !known && caller {
			err = strictjson.UnknownField(string(key), callerFields)
		} else if !known {
			err = d.skip()
		}
	}
	if err == nil {
		return d.end()
	}
	if err == errSlowKey {
		saved.Payload = cloneRaw(saved.Payload)
		if caller {
			if err := onlyCallerFields(b); err != nil {
				*c = saved
				return err
			}
		}
		return unmarshalFrom(b, c, saved)
	}
	return err
}

// onlyCallerFields checks the keys of the object b against callerFields
// the way encoding/json matches them (ignoring case), for a body whose
// keys need encoding/json's unescaping. The first unknown key in sorted
// order is reported: a map keeps no order.
func onlyCallerFields(b []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.ContainsFunc(callerFields, func(f string) bool { return strings.EqualFold(f, k) }) {
			return strictjson.UnknownField(k, callerFields)
		}
	}
	return nil
}

// DecodeBusMessage decodes the JSON object b into m as json.Unmarshal(b, m)
// would, like DecodeToolCall. Payload aliases b.
func DecodeBusMessage(b []byte, m *BusMessage) error {
	saved := *m
	d, err := openObject(b)
	for err == nil {
		var key []byte
		var ok bool
		if key, ok, err = d.next(); !ok || err != nil {
			break
		}
		var ferr error
		switch {
		case keyIs(key, "type"):
			ferr = d.str(&m.Type)
		case keyIs(key, "reason"):
			ferr = d.str(&m.Reason)
		case keyIs(key, "holder"):
			ferr = d.str(&m.Holder)
		case keyIs(key, "since"):
			ferr = d.int(&m.Since)
		default:
			var known bool
			if known, ferr = d.toolCallField(key, &m.ToolCall); !known {
				err = d.skip()
			}
		}
		if ferr != nil {
			err = fieldError(key, ferr)
		}
	}
	if err == nil {
		return d.end()
	}
	if err == errSlowKey {
		saved.Payload = cloneRaw(saved.Payload)
		return unmarshalFrom(b, m, saved)
	}
	return err
}

// DecodeToolResponse decodes the JSON object b into r as json.Unmarshal(b, r)
// would, like DecodeToolCall. Result aliases b. DecodeResponse adds the rules
// of what counts as an answer.
func DecodeToolResponse(b []byte, r *ToolResponse) error {
	saved := *r
	d, err := openObject(b)
	for err == nil {
		var key []byte
		var ok bool
		if key, ok, err = d.next(); !ok || err != nil {
			break
		}
		var ferr error
		switch {
		case keyIs(key, "correlation_id"):
			ferr = d.str(&r.CorrelationID)
		case keyIs(key, "success"):
			ferr = d.boolean(&r.Success)
		case keyIs(key, "result"):
			ferr = d.raw(&r.Result)
		case keyIs(key, "error"):
			ferr = d.str(&r.Error)
		case keyIs(key, "message"):
			ferr = d.str(&r.Message)
		default:
			err = d.skip()
		}
		if ferr != nil {
			err = fieldError(key, ferr)
		}
	}
	if err == nil {
		return d.end()
	}
	if err == errSlowKey {
		saved.Result = cloneRaw(saved.Result)
		return unmarshalFrom(b, r, saved)
	}
	return err
}

// unmarshalFrom sets *v to what json.Unmarshal(b, ...) makes of saved, the
// value *v had before the fast path began on it. It decodes into a copy so
// that v itself does not escape to the heap on the fast path.
func unmarshalFrom[T any](b []byte, v *T, saved T) error {
	tmp := new(T)
	*tmp = saved
	err := json.Unmarshal(b, tmp)
	*v = *tmp
	return err
}

// cloneRaw copies a RawMessage before json.Unmarshal decodes into it: its
// UnmarshalJSON appends into the old array, which may be part of an input
// an earlier decode aliased.
func cloneRaw(m json.RawMessage) json.RawMessage {
	if m == nil {
		return nil
	}
	return append(json.RawMessage{}, m...)
}

// AppendToolResponse appends the JSON of r to dst: the bytes json.Marshal
// writes, provided Result is valid JSON without whitespace between tokens.
// Result is copied, not checked: it must be valid JSON (it is when it came
// from DecodeToolResponse or DecodeResponse); whitespace in it stays.
func AppendToolResponse(dst []byte, r *ToolResponse) []byte {
	dst = append(dst, `{"correlation_id":`...)
	dst = appendString(dst, r.CorrelationID)
	if r.Success {
		dst = append(dst, `,"success":true`...)
	} else {
		dst = append(dst, `,"success":false`...)
	}
	if len(r.Result) > 0 {
		dst = append(dst, `,"result":`...)
		dst = appendRaw(dst, r.Result)
	}
	if r.Error != "" {
		dst = append(dst, `,"error":`...)
		dst = appendString(dst, r.Error)
	}
	if r.Message != "" {
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, r.Message)
	}
	return append(dst, '}')
}

// AppendToolCall appends the JSON of c to dst: the bytes json.Marshal
// writes, provided Payload is valid JSON without whitespace between tokens
// and Timeout is finite. Payload is copied, not checked, as in
// AppendToolResponse. A NaN or infinite Timeout, which json.Marshal refuses,
// is written as null (as JavaScript's JSON.stringify does); Validate rejects
// such a call before it is sent.
func AppendToolCall(dst []byte, c *ToolCall) []byte {
	dst = append(dst, '{')
	dst = appendToolCallFields(dst, c)
	return append(dst, '}')
}

// AppendBusMessage appends the JSON of m to dst in json.Marshal's field
// order (type, the ToolCall's fields, reason, holder, since), under the
// conditions of AppendToolCall.
func AppendBusMessage(dst []byte, m *BusMessage) []byte {
	dst = append(dst, '{')
	if m.Type != "" {
		dst = append(dst, `"type":`...)
		dst = appendString(dst, m.Type)
		dst = append(dst, ',')
	}
	dst = appendToolCallFields(dst, &m.ToolCall)
	if m.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = appendString(dst, m.Reason)
	}
	if m.Holder != "" {
		dst = append(dst, `,"holder":`...)
		dst = appendString(dst, m.Holder)
	}
	if m.Since != 0 {
		dst = append(dst, `,"since":`...)
		dst = strconv.AppendInt(dst, m.Since, 10)
	}
	return append(dst, '}')
}

func appendToolCallFields(dst []byte, c *ToolCall) []byte {
	dst = append(dst, `"correlation_id":`...)
	dst = appendString(dst, c.CorrelationID)
	dst = append(dst, `,"endpoint":`...)
	dst = appendString(dst, c.Endpoint)
	if len(c.Payload) > 0 {
		dst = append(dst, `,"payload":`...)
		dst = appendRaw(dst, c.Payload)
	}
	dst = append(dst, `,"timeout":`...)
	dst = appendFloat(dst, c.Timeout)
	if c.ReplyTo != "" {
		dst = append(dst, `,"reply_to":`...)
		dst = appendString(dst, c.ReplyTo)
	}
	if c.DeadlineMS != 0 {
		dst = append(dst, `,"deadline_ms":`...)
		dst = strconv.AppendInt(dst, c.DeadlineMS, 10)
	}
	if c.WaitForWorkspaceMS != 0 {
		dst = append(dst, `,"wait_for_workspace_ms":`...)
		dst = strconv.AppendInt(dst, c.WaitForWorkspaceMS, 10)
	}
	if c.Async {
		dst = append(dst, `,"async":true`...)
	}
	if c.IdempotencyKey != "" {
		dst = append(dst, `,"idempotency_key":`...)
		dst = appendString(dst, c.IdempotencyKey)
	}
	return dst
}

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
