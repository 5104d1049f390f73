package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/strictjson"
)

// FuzzDecode holds Decode to encoding/json's answer: it accepts exactly
// what a json.Decoder with DisallowUnknownFields accepts as one value, and
// whenever encoding/json refuses a member (unknown, or of the wrong type)
// the error is a FieldError for that member.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"command":"ls"}`, `{"comand":"ls"}`,
		`{"breakpoints":[{"path":"a.c","line":3}]}`,
		`{"breakpoints":[{"path":"a.c","breakpoints":[{"line":3},{"line":"4"}]}]}`,
		`{"env":{"A":1},"config":{"x":[1,2]}}`, `{"count":300}`, `{"quoted":"x"}`,
		`{"connect":{"port":1e3}}`, `{"\u0063ommand":"ls"}`, `{"COMMAND":"ls"}`, "{\"\xff\":1}",
		`{"session_id":"s"} {}`, `{"raw":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got request
		err := strictjson.Decode(data, &got)

		var want request
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		werr := dec.Decode(&want)
		if werr == nil {
			if _, terr := dec.Token(); terr != io.EOF {
				werr = errors.New("trailing data")
			}
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("Decode: %v; encoding/json: %v", err, werr)
		}
		if werr == nil {
			return
		}
		var fe *strictjson.FieldError
		isField := errors.As(err, &fe)
		var ute *json.UnmarshalTypeError
		if key, ok := strings.CutPrefix(werr.Error(), "json: unknown field "); ok {
			if !isField || !fe.Unknown {
				t.Fatalf("encoding/json: %v; Decode: %v", werr, err)
			}
			name, uerr := strconv.Unquote(key)
			if uerr == nil && !strings.HasSuffix(fe.Path, name) && !strings.HasSuffix(fe.Path, "']") {
				t.Fatalf("encoding/json names %q, Decode's path is %q", name, fe.Path)
			}
		} else if errors.As(werr, &ute) && !isField {
			t.Fatalf("encoding/json: %v; Decode: %v", werr, err)
		}
		if isField && fe.Error() == "" {
			t.Fatal("empty message")
		}
	})
}
