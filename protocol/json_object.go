package protocol

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// errSlowKey sends a decoder to encoding/json: an escaped or non-ASCII key
// needs its unescaping and Unicode case folding (U+212A KELVIN SIGN matches
// "k") to find its field.
var errSlowKey = errors.New("json: key needs encoding/json")

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
