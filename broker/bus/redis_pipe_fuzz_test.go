package bus

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
)

// FuzzParseIntReply: a reply line from Redis to a PUBLISH is a count, a
// Redis error, or refused; nothing panics, and a count is exactly what the
// line says.
func FuzzParseIntReply(f *testing.F) {
	for _, s := range []string{":0\r\n", ":1\r\n", ":42\r\n", ":-1\r\n", "-ERR wrong\r\n", "+OK\r\n", "$3\r\n", ":\r\n", ":1x\r\n", "\r\n", ":99999999999999999999\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		n, err := parseIntReply(line)
		body := bytes.TrimSuffix(line, []byte("\r\n"))
		switch {
		case len(body) > 0 && body[0] == ':':
			want, perr := strconv.Atoi(string(body[1:]))
			if perr != nil {
				if !errors.Is(err, errUnexpectedReply) {
					t.Fatalf("%q: got %d, %v; want errUnexpectedReply", line, n, err)
				}
			} else if err != nil || n != want {
				t.Fatalf("%q: got %d, %v; want %d", line, n, err, want)
			}
		case len(body) > 0 && body[0] == '-':
			var re redisError
			if !errors.As(err, &re) || string(re) != string(body[1:]) {
				t.Fatalf("%q: got %d, %v; want the Redis error", line, n, err)
			}
		default:
			if !errors.Is(err, errUnexpectedReply) {
				t.Fatalf("%q: got %d, %v; want errUnexpectedReply", line, n, err)
			}
		}
	})
}
