package strictjson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/strictjson"
)

// The shapes of tether's request types, without importing them: a struct
// nested in a slice, free-form maps, a raw member, pointers, an embedded
// struct.
type sourceBreakpoint struct {
	Line      int    `json:"line"`
	Condition string `json:"condition,omitempty"`
}

type fileBreakpoints struct {
	Path        string             `json:"path"`
	Breakpoints []sourceBreakpoint `json:"breakpoints"`
}

type address struct {
	Host string `json:"host,omitempty"`
	Port int    `json:"port"`
}

type common struct {
	SessionID string `json:"session_id"`
}

type request struct {
	common
	Command     string            `json:"command"`
	Cwd         string            `json:"cwd,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Config      map[string]any    `json:"config,omitempty"`
	Raw         json.RawMessage   `json:"raw,omitempty"`
	Timeout     float64           `json:"timeout,omitempty"`
	Wait        *bool             `json:"wait,omitempty"`
	Connect     *address          `json:"connect,omitempty"`
	Breakpoints []fileBreakpoints `json:"breakpoints,omitempty"`
	Count       uint8             `json:"count,omitempty"`
	Quoted      int               `json:"quoted,omitempty,string"`
	Ignored     string            `json:"-"`
	//lint:ignore U1000 an unexported field, which is no JSON field, is the point
	hidden string
}

func TestDecodeAcceptsWhatFits(t *testing.T) {
	for _, in := range []string{
		`{}`,
		` null `,
		`{"command":"ls","cwd":"sub","timeout":1.5,"wait":false,"count":255}`,
		`{"Command":"ls","SESSION_ID":"s1"}`, // encoding/json matches ignoring case
		`{"session_id":"s1"}`,                // promoted from the embedded struct
		`{"env":{"A":"1","B C":"2"},"config":{"anything":[1,{"x":null}],"type":"lldb"}}`,
		`{"raw":{"free":["form"]},"connect":{"port":5678}}`,
		`{"breakpoints":[{"path":"a.c","breakpoints":[{"line":3},{"line":4,"condition":"i>2"}]}]}`,
		`{"command":null,"env":null,"breakpoints":[null],"connect":null}`,
		`{"quoted":"12"}`,
	} {
		var r request
		if err := strictjson.Decode([]byte(in), &r); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	var r request
	if err := strictjson.Decode([]byte(`{"command":"ls","breakpoints":[{"path":"a.c","breakpoints":[{"line":3}]}]}`), &r); err != nil ||
		r.Command != "ls" || r.Breakpoints[0].Breakpoints[0].Line != 3 {
		t.Fatalf("decoded %+v, %v", r, err)
	}
}

func TestDecodeNamesTheUnknownFieldAndWhatItMeant(t *testing.T) {
	for _, tc := range []struct {
		in, path, suggestion, text string
	}{
		{`{"comand":"ls"}`, "comand", "command", `unknown field "comand" (did you mean "command"?)`},
		{`{"cmd":"ls"}`, "cmd", "command", ""},
		{`{"sessionId":"s"}`, "sessionId", "session_id", ""},
		{`{"working_dir":"x"}`, "working_dir", "cwd", ""},
		{`{"command":"ls","breakpoints":[{"path":"a.c","line":3}]}`, "breakpoints[0].line", "breakpoints[0].breakpoints[].line",
			`unknown field "breakpoints[0].line" (did you mean "breakpoints[0].breakpoints[].line"?)`},
		{`{"breakpoints":[{"path":"a.c","breakpoints":[{"line":3},{"lin":4}]}]}`, "breakpoints[0].breakpoints[1].lin", "breakpoints[0].breakpoints[1].line", ""},
		{`{"connect":{"port":1,"hots":"h"}}`, "connect.hots", "connect.host", ""},
		{`{"line":3}`, "line", "breakpoints[].breakpoints[].line", ""},
		{`{"port":3}`, "port", "connect.port", ""},
		{`{"zzzzzz":1}`, "zzzzzz", "", `unknown field "zzzzzz" (known fields: command, cwd, env, config, raw, timeout, wait, connect, breakpoints, count, quoted, session_id)`},
		{`{"hidden":"x"}`, "hidden", "", ""},
		{`{"Ignored":"x"}`, "Ignored", "", ""},
		{`{"a b":1}`, `a b`, "", ""},
		{`{"connect":{"it's":1}}`, `connect['it\'s']`, "", ""},
	} {
		var r request
		err := strictjson.Decode([]byte(tc.in), &r)
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) || !fe.Unknown {
			t.Errorf("%s: got %v, want an unknown-field error", tc.in, err)
			continue
		}
		if fe.Path != tc.path || fe.Suggestion != tc.suggestion {
			t.Errorf("%s: path %q suggestion %q, want %q %q", tc.in, fe.Path, fe.Suggestion, tc.path, tc.suggestion)
		}
		if tc.text != "" && err.Error() != tc.text {
			t.Errorf("%s: text %q, want %q", tc.in, err.Error(), tc.text)
		}
	}
}

func TestDecodeNamesTheFieldAndTypeOfAWrongValue(t *testing.T) {
	for _, tc := range []struct{ in, text string }{
		{`{"command":5}`, `field "command": expected a string, got the number 5`},
		{`{"timeout":"30"}`, `field "timeout": expected a number, got a string`},
		{`{"wait":"yes"}`, `field "wait": expected a boolean, got a string`},
		{`{"count":256}`, `field "count": expected a non-negative integer that fits uint8, got the number 256`},
		{`{"count":-1}`, `field "count": expected a non-negative integer that fits uint8, got the number -1`},
		{`{"breakpoints":[{"path":"a","breakpoints":[{"line":1},{"line":2.5}]}]}`, `field "breakpoints[0].breakpoints[1].line": expected an integer that fits int, got the number 2.5`},
		{`{"breakpoints":{"path":"a"}}`, `field "breakpoints": expected an array, got an object`},
		{`{"breakpoints":[3]}`, `field "breakpoints[0]": expected an object, got the number 3`},
		{`{"env":{"A":1}}`, `field "env.A": expected a string, got the number 1`},
		{`{"env":{"A B":true}}`, `field "env['A B']": expected a string, got a boolean`},
		{`{"connect":[]}`, `field "connect": expected an object, got an array`},
		{`[]`, `expected an object, got an array`},
		{`"x"`, `expected an object, got a string`},
		{`{"quoted":"0000000A"}`, `field "quoted": expected a string holding a number, got the string "0000000A"`},
		{`{"quoted":"99999999999999999999"}`, `field "quoted": expected a string holding an integer that fits int, got the string "99999999999999999999"`},
		{`{"quoted":"0 "}`, `field "quoted": expected a string holding a number and nothing around it, got the string "0 "`},
	} {
		var r request
		err := strictjson.Decode([]byte(tc.in), &r)
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) || fe.Unknown {
			t.Errorf("%s: got %v, want a type error", tc.in, err)
			continue
		}
		if err.Error() != tc.text {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, err.Error(), tc.text)
		}
	}
}

func TestDecodeRefusesMalformedInputAndTrailingData(t *testing.T) {
	for _, in := range []string{``, `{`, `{"command":}`, `{} {}`, `{} x`, `{"command":"ls"}]`, strings.Repeat("[", 100_000)} {
		var r request
		err := strictjson.Decode([]byte(in), &r)
		var fe *strictjson.FieldError
		if err == nil || errors.As(err, &fe) {
			t.Errorf("%.40q: got %v, want a syntax error", in, err)
		}
	}
}

func TestDecodeIntoRawMessageAndEmptyStruct(t *testing.T) {
	var raw json.RawMessage
	if err := strictjson.Decode([]byte(`{"any":["thing"]}`), &raw); err != nil || string(raw) != `{"any":["thing"]}` {
		t.Fatalf("raw: %s %v", raw, err)
	}
	var none struct{}
	err := strictjson.Decode([]byte(`{"session_id":"s"}`), &none)
	if err == nil || err.Error() != `unknown field "session_id" (no fields are allowed here)` {
		t.Fatalf("empty struct: %v", err)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"command", "cwd", "env", "mode", "timeout", "stdin", "hidden"}
	for name, want := range map[string]string{
		"comand":  "command",
		"Command": "command",
		"cmd":     "command",
		"timout":  "timeout",
		"TimeOut": "timeout",
		"mod":     "mode",
		"dir":     "cwd",
		"input":   "stdin",
		"hiden":   "hidden",
		"x":       "",
		"id":      "",
		"banana":  "",
		"":        "",
	} {
		if got := strictjson.Suggest(name, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestUnknownFieldText(t *testing.T) {
	err := strictjson.UnknownField("timout", []string{"endpoint", "payload", "timeout"})
	if err.Error() != `unknown field "timout" (did you mean "timeout"?)` {
		t.Fatal(err)
	}
}
