package protocol_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

// JSON texts that encoding/json accepts, each a trap for a hand-written
// scanner: they must be accepted too.
var validJSONTexts = []string{
	`[]`, ` [ ] `, "\t[\n1\r, 2 ]\n", `[-0]`, `[-0.0e-0]`, `[1e400]`, `[-1e400]`, `[1e-400]`,
	`[1E+2,1e-2,0.5,10,-10.25E2]`, `[12345678901234567890123456789]`, `[0]`, `[0e0]`, `[0.0]`,
	`["\u00e9\ud83c\udf89"]`, `["\ud800"]`, `["\udc00\ud800"]`, `["\"\\\/\b\f\n\r\t"]`, `["\u0000"]`,
	"[\"\xff\xfe\"]", "[\"\xed\xa0\x80\"]", "[\"\x7f\"]", `["é"]`, `["\u2028 \u2029"]`, "[\"\u2028\"]",
	`[{"a":{"b":[[],{}]}},null,true,false]`, `[""]`, `[{}]`, `[[[]]]`, `[ { } , [ ] ]`,
	`[{"a":1,"a":2}]`, `[{"":""}]`, "[\"<>&\"]", `["` + strings.Repeat("x", 100) + `\n"]`,
	`{}`, `"a"`, `1`, `null`, `true`, `false`, ` "x" `, `{"a":[1,{"b":null}]}`,
	`-1`, `-0`, `123.456e-7`,
}

// JSON texts that encoding/json rejects.
var invalidJSONTexts = []string{
	``, ` `, `[`, `]`, `[1,]`, `[,1]`, `[,]`, `[1 2]`, `[1]x`, `[1] [2]`, `[1]]`, `[[]`, `[}`, `{]`,
	"\xef\xbb\xbf[1]", "\xef\xbb\xbf{}", `[01]`, `[00]`, `[-01]`, `[1.]`, `[.5]`, `[-]`, `[-.5]`, `[1e]`, `[1e+]`, `[1E-]`,
	`[+1]`, `[0x10]`, `[Infinity]`, `[NaN]`, `[-Infinity]`, `[1.e5]`, `[1.5e]`,
	"[\"\x01\"]", "[\"\t\"]", "[\"\n\"]", `["\q"]`, `["\u12"]`, `["\u12G4"]`, `["\U0041"]`, `["\x41"]`, `["\'"]`,
	`["abc]`, `["abc\"]`, `["\`, `"`, `"\u`, `[tru]`, `[nul]`, `[nulll]`, `[True]`, `[NULL]`, `[fals]`, `[falsee]`,
	`[{"a"}]`, `[{"a":1,}]`, `[{1:2}]`, `[{"a" 1}]`, `[{"a":1 "b":2}]`, `['a']`, "[1]\x00", `[1]/`, `[1]//`,
	`{"a":1}}`, `{"a":}`, `{"a"::1}`, `{,}`, `{"a":1,,"b":2}`, `{a:1}`, `[1,,2]`, `nul`, `t`, `-`, `1 2`,
	"[\"a\"\x00]", "\x00", "[\v1]", "[\f1]", "[\u00a01]", `["\a"]`, `["\v"]`, `["\0"]`, `["\e"]`, `["\ "]`,
}

func nested(open, close string, depth int) string {
	return strings.Repeat(open, depth) + strings.Repeat(close, depth)
}

// checkValidMatches asserts that Valid answers as json.Valid does.
func checkValidMatches(t *testing.T, b []byte) bool {
	t.Helper()
	got, want := protocol.Valid(b), json.Valid(b)
	if got != want {
		t.Errorf("Valid(%q) = %v, json.Valid says %v", truncate(b), got, want)
	}
	return got
}

// checkSplitArrayMatches asserts that SplitArray accepts exactly what
// json.Unmarshal accepts into a []json.RawMessage (null aside: it is no
// array) and returns the same elements.
func checkSplitArrayMatches(t *testing.T, b []byte) ([]json.RawMessage, error) {
	t.Helper()
	in := bytes.Clone(b)
	got, err := protocol.SplitArray(b)
	if !bytes.Equal(in, b) {
		t.Fatalf("SplitArray changed its input %q to %q", in, b)
	}
	want := []json.RawMessage{}
	wantErr := json.Unmarshal(b, &want)
	if wantErr == nil && want == nil { // the input was null
		if err == nil {
			t.Errorf("SplitArray(%q) = %q, want an error for null", truncate(b), got)
		}
		return got, err
	}
	if (err != nil) != (wantErr != nil) {
		t.Errorf("SplitArray(%q) error = %v, json.Unmarshal error = %v", truncate(b), err, wantErr)
		return got, err
	}
	if err != nil {
		return got, err
	}
	if got == nil {
		t.Errorf("SplitArray(%q) = nil slice, want non-nil", truncate(b))
	}
	if len(got) != len(want) {
		t.Fatalf("SplitArray(%q) = %d elements %q, json.Unmarshal gives %d %q", truncate(b), len(got), got, len(want), want)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("SplitArray(%q) element %d = %q, json.Unmarshal gives %q", truncate(b), i, got[i], want[i])
		}
		if cap(got[i]) != len(got[i]) {
			t.Errorf("SplitArray(%q) element %d has capacity %d beyond its length %d", truncate(b), i, cap(got[i]), len(got[i]))
		}
	}
	return got, err
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return append(b[:60:60], "..."...)
	}
	return b
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range validJSONTexts {
		if !checkValidMatches(t, []byte(s)) {
			t.Errorf("Valid(%q) = false, want true", s)
		}
	}
	for _, s := range invalidJSONTexts {
		if checkValidMatches(t, []byte(s)) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}

// The string scanner skips 8 bytes at a time; a forbidden byte must stop it
// wherever it sits in the word.
func TestValidRejectsControlCharacterAtEveryPositionOfAString(t *testing.T) {
	for c := byte(0); c < 0x20; c++ {
		for pos := 0; pos < 20; pos++ {
			s := []byte(`["` + strings.Repeat("a", 20) + `"]`)
			s[2+pos] = c
			if checkValidMatches(t, s) {
				t.Errorf("Valid(%q) = true, want false", s)
			}
			checkSplitArrayMatches(t, s)
		}
	}
}

func TestValidFindsQuotesAndBackslashesAtEveryPositionOfAString(t *testing.T) {
	for pos := 0; pos < 20; pos++ {
		for _, ins := range []string{`"`, `\`, `\"`, `\\`, `\u0041`, `\x`, `\u00`, `\u00zz`} {
			s := []byte(`["` + strings.Repeat("a", pos) + ins + strings.Repeat("b", 20-pos) + `"]`)
			checkValidMatches(t, s)
			checkSplitArrayMatches(t, s)
		}
	}
}

func TestValidAcceptsEncodingJSONsMaximumDepth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{nested("[", "]", 10000), true},
		{nested("[", "]", 10001), false},
		{nested(`{"a":`, "}", 9999), false}, // no innermost value
		{strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000), true},
		{strings.Repeat(`{"a":`, 10000) + "[]" + strings.Repeat("}", 10000), false},
		{strings.Repeat(`{"a":`, 9999) + "[]" + strings.Repeat("}", 9999), true},
		{strings.Repeat(`[{"a":`, 5000) + "1" + strings.Repeat("}]", 5000), true},
		{strings.Repeat(`[{"a":`, 5000) + "[]" + strings.Repeat("}]", 5000), false},
	} {
		if got := checkValidMatches(t, []byte(tc.in)); got != tc.want {
			t.Errorf("Valid(%d bytes of nesting) = %v, want %v", len(tc.in), got, tc.want)
		}
	}
}

func TestSplitArrayAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range append(append([]string{}, validJSONTexts...), invalidJSONTexts...) {
		checkSplitArrayMatches(t, []byte(s))
	}
}

func TestSplitArrayReturnsElementsWithoutWhitespace(t *testing.T) {
	b := []byte(" \t[ \"ev\" ,\n{ \"a\" : [ 1 , 2 ] } ,\r\"s\",null , 3.5e1 ] \n")
	got, err := checkSplitArrayMatches(t, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`"ev"`, `{ "a" : [ 1 , 2 ] }`, `"s"`, `null`, `3.5e1`}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("element %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestSplitArrayElementsAliasInput(t *testing.T) {
	b := []byte(`["tool_call",{"a":1}]`)
	got, err := protocol.SplitArray(b)
	if err != nil {
		t.Fatal(err)
	}
	if &got[1][0] != &b[13] {
		t.Errorf("element 1 does not alias the input")
	}
	// Appending to an element must not run over the rest of the input.
	_ = append(got[0], "XXXX"...)
	if string(b) != `["tool_call",{"a":1}]` {
		t.Errorf("appending to an element changed the input to %q", b)
	}
}

func TestSplitArrayOfEmptyArrayIsEmptyNotNil(t *testing.T) {
	for _, s := range []string{`[]`, ` [ ] `, "[\n]"} {
		got, err := protocol.SplitArray([]byte(s))
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("SplitArray(%q) = %#v, %v; want an empty non-nil slice", s, got, err)
		}
	}
}

func TestSplitArrayRejectsNonArrays(t *testing.T) {
	for _, s := range []string{``, `   `, `null`, ` null `, `{}`, `"[1]"`, `1`, `true`, `{"a":[1]}`} {
		if got, err := protocol.SplitArray([]byte(s)); err == nil {
			t.Errorf("SplitArray(%q) = %q, want an error", s, got)
		}
	}
}

func TestSplitArrayRejectsTrailingGarbageAndBOM(t *testing.T) {
	for _, s := range []string{`[1] x`, `[1][2]`, `[1],`, "\xef\xbb\xbf[1]", `[1]` + "\x00", `[1]]`} {
		if got, err := checkSplitArrayMatches(t, []byte(s)); err == nil {
			t.Errorf("SplitArray(%q) = %q, want an error", s, got)
		}
	}
}

func TestSplitArrayEnforcesEncodingJSONsDepthLimit(t *testing.T) {
	if _, err := checkSplitArrayMatches(t, []byte(nested("[", "]", 10000))); err != nil {
		t.Errorf("10000 levels: %v, want accepted", err)
	}
	if _, err := checkSplitArrayMatches(t, []byte(nested("[", "]", 10001))); err == nil {
		t.Errorf("10001 levels accepted, want an error")
	}
	deep := "[1," + nested("[", "]", 9999) + "]"
	if _, err := checkSplitArrayMatches(t, []byte(deep)); err != nil {
		t.Errorf("element of 9999 levels in the array: %v, want accepted", err)
	}
	if _, err := checkSplitArrayMatches(t, []byte("[1,"+nested("[", "]", 10000)+"]")); err == nil {
		t.Errorf("element of 10000 levels in the array accepted, want an error")
	}
}

// A prefilled value shows which fields a decode leaves alone.
func oldToolCall() protocol.ToolCall {
	return protocol.ToolCall{
		CorrelationID: "old", Endpoint: "/old", Payload: json.RawMessage(`"old"`), Timeout: 7,
		ReplyTo: "old", DeadlineMS: 7, WaitForWorkspaceMS: 7, Async: true, IdempotencyKey: "old",
	}
}

func oldBusMessage() protocol.BusMessage {
	return protocol.BusMessage{Type: "old", ToolCall: oldToolCall(), Reason: "old", Holder: "old", Since: 7}
}

func oldToolResponse() protocol.ToolResponse {
	return protocol.ToolResponse{CorrelationID: "old", Success: true, Result: json.RawMessage(`"old"`), Error: "old", Message: "old"}
}

// sameValue is reflect.DeepEqual that also tells -0 from 0.
func sameValue(a, b any) bool {
	if !reflect.DeepEqual(a, b) {
		return false
	}
	var fa, fb float64
	switch x := a.(type) {
	case protocol.ToolCall:
		fa, fb = x.Timeout, b.(protocol.ToolCall).Timeout
	case protocol.BusMessage:
		fa, fb = x.Timeout, b.(protocol.BusMessage).Timeout
	}
	return math.Float64bits(fa) == math.Float64bits(fb)
}

// isNull reports whether b is the JSON null, which json.Unmarshal ignores
// and our decoders reject (they want an object).
func isNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

// checkDecodeMatches runs decode and json.Unmarshal from the same prefilled
// value and asserts the same outcome: both fail, or both succeed with equal
// values.
func checkDecodeMatches[T any](t *testing.T, name string, b []byte, old func() T, decode func([]byte, *T) error) (T, error) {
	t.Helper()
	in := bytes.Clone(b)
	got := old()
	err := decode(b, &got)
	if !bytes.Equal(in, b) {
		t.Fatalf("%s changed its input %q to %q", name, in, b)
	}
	want := old()
	wantErr := json.Unmarshal(b, &want)
	if isNull(b) {
		if err == nil {
			t.Errorf("%s(%q) accepted null, want an error", name, b)
		}
		return got, err
	}
	if (err != nil) != (wantErr != nil) {
		t.Errorf("%s(%q) error = %v, json.Unmarshal error = %v", name, truncate(b), err, wantErr)
		return got, err
	}
	if err == nil && !sameValue(got, want) {
		t.Errorf("%s(%q) = %+v, json.Unmarshal gives %+v", name, truncate(b), got, want)
	}
	return got, err
}

func checkDecodeToolCall(t *testing.T, b []byte) (protocol.ToolCall, error) {
	t.Helper()
	return checkDecodeMatches(t, "DecodeToolCall", b, oldToolCall, protocol.DecodeToolCall)
}

func checkDecodeBusMessage(t *testing.T, b []byte) (protocol.BusMessage, error) {
	t.Helper()
	return checkDecodeMatches(t, "DecodeBusMessage", b, oldBusMessage, protocol.DecodeBusMessage)
}

func checkDecodeToolResponse(t *testing.T, b []byte) (protocol.ToolResponse, error) {
	t.Helper()
	return checkDecodeMatches(t, "DecodeToolResponse", b, oldToolResponse, protocol.DecodeToolResponse)
}

// Objects for every decoder: each is decoded by all three and compared with
// json.Unmarshal, so a trap for one field type is tried on every type.
var decodeTexts = []string{
	`{}`, ` { } `, "\t{\n}\r\n", `{"unknown":{"deep":[1,"x",null,{"y":true}]}}`,
	`{"correlation_id":"c1","endpoint":"/fs/read","payload":{"path":"/a"},"timeout":30}`,
	`{"correlation_id":"c1","endpoint":"/e","timeout":0.1,"reply_to":"inbox.1","deadline_ms":1700000000000,"wait_for_workspace_ms":5000}`,
	`{"type":"cancel","correlation_id":"c9","reason":"caller gone"}`,
	`{"type":"takeover","holder":"b1:conn7","since":1700000000123456789}`,
	`{"correlation_id":"c1","success":true,"result":{"lines":["ü",1]}}`,
	`{"correlation_id":"c2","success":false,"error":"unknown_route","message":"no route"}`,
	// Whitespace everywhere.
	" {\n \"correlation_id\" :\t\"c1\" ,\r\n \"payload\" : [ 1 , { } ] , \"timeout\" : 5 , \"success\" : true } \n",
	// Null leaves strings, numbers and bools alone and stores null in a RawMessage.
	`{"correlation_id":null,"endpoint":null,"payload":null,"timeout":null,"reply_to":null,"deadline_ms":null,"wait_for_workspace_ms":null}`,
	`{"async":null,"idempotency_key":null}`, `{"async":true,"idempotency_key":"k\u00e9y"}`, `{"async":false}`, `{"async":tru}`, `{"async":0}`,
	`{"type":null,"reason":null,"holder":null,"since":null,"success":null,"result":null,"error":null,"message":null}`,
	// Duplicate keys: the last wins.
	`{"correlation_id":"a","correlation_id":"b","payload":1,"payload":[2],"timeout":1,"timeout":2,"success":true,"success":false}`,
	`{"endpoint":"/a","ENDPOINT":"/b","Endpoint":"/c"}`,
	// Keys match ignoring ASCII case.
	`{"CORRELATION_ID":"c1","Endpoint":"/e","PayLoad":{},"TIMEOUT":1.5,"Reply_To":"r","DEADLINE_MS":3,"Wait_For_Workspace_MS":4}`,
	`{"TYPE":"cancel","Reason":"r","HOLDER":"h","Since":1,"SUCCESS":true,"Result":1,"ERROR":"e","Message":"m"}`,
	`{"correlation_id ":"x","correlationid":"y","correlation-id":"z","":"empty"}`,
	// Escaped and non-ASCII keys go the slow way and still match.
	`{"\u0065ndpoint":"/escaped","correlation\u005fid":"c","\u0073uccess":true}`,
	`{"wait_for_wor\u212Aspace_ms":5,"\u017Fince":6,"\u017Fuccess":true}`,
	"{\"wait_for_wor\u212Aspace_ms\":5,\"\u017Fince\":6,\"\u017Fuccess\":true,\"\u017Fuccess\":false}",
	"{\"endpoint\":\"/a\",\"\u00e9\":1,\"endpoint\":\"/b\",\"payload\":[1]}",
	`{"payload":[1],"a\"b":2,"payload":{"c":3}}`,
	"{\"\xff\":1,\"endpoint\":\"/e\"}",
	`{"endpoint":"/a","\u00e9":1}x`,
	// Strings: escapes, Unicode, invalid UTF-8, lone surrogates.
	`{"correlation_id":"\u00e9\ud83c\udf89\n\t\"\\\/","endpoint":"\u0000","message":"\ud800","error":"\udc00x"}`,
	"{\"correlation_id\":\"\xff\xfe\",\"endpoint\":\"\xed\xa0\x80\",\"message\":\"ok \xc3\",\"error\":\"é€𝄞\"}",
	`{"correlation_id":"<>&\u2028\u2029"}`,
	// Numbers.
	`{"timeout":-0}`, `{"timeout":-0.0}`, `{"timeout":0}`, `{"timeout":1e400}`, `{"timeout":-1e400}`, `{"timeout":1e-400}`,
	`{"timeout":01}`, `{"timeout":1.}`, `{"timeout":.5}`, `{"timeout":+1}`, `{"timeout":1e}`, `{"timeout":-}`,
	`{"timeout":123456789012345678901234567890}`, `{"timeout":0.1}`, `{"timeout":600.0000000000001}`, `{"timeout":1E2}`,
	`{"timeout":999999999999999}`, `{"timeout":9999999999999999}`, `{"timeout":-999999999999999}`, `{"timeout":9007199254740993}`,
	`{"deadline_ms":9223372036854775807}`, `{"deadline_ms":9223372036854775808}`, `{"deadline_ms":-9223372036854775808}`,
	`{"deadline_ms":-9223372036854775809}`, `{"deadline_ms":-0}`, `{"deadline_ms":1.0}`, `{"deadline_ms":1e3}`, `{"deadline_ms":0.5}`,
	`{"since":99999999999999999999}`, `{"since":123456789012345678}`, `{"since":-123456789012345678}`, `{"wait_for_workspace_ms":1E0}`,
	`{"deadline_ms":999999999999999999}`, `{"deadline_ms":1000000000000000000}`,
	// Type mismatches.
	`{"endpoint":1}`, `{"endpoint":true}`, `{"endpoint":{}}`, `{"endpoint":[]}`, `{"timeout":"5"}`, `{"timeout":true}`,
	`{"timeout":[]}`, `{"success":"true"}`, `{"success":1}`, `{"success":{}}`, `{"deadline_ms":true}`, `{"deadline_ms":"1"}`,
	`{"type":0}`, `{"since":"1"}`, `{"message":false}`, `{"error":[]}`,
	// Syntax errors, trailing garbage, BOM, not an object.
	``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,"a":1}`, `{"a":1 "b":2}`, `{"a" 1}`, `{a:1}`, `{'a':1}`,
	`{} x`, `{}{}`, `{} {}`, `{}]`, `{},`, "\xef\xbb\xbf{}", `{}` + "\x00", `[]`, `[{}]`, `"x"`, `1`, `true`, `null`, ` null `,
	`{"endpoint":"/e"`, `{"endpoint":"/e",`, `{"endpoint":"/e`, `{"endpoint":tru}`, `{"endpoint":nul}`, `{"success":truex}`,
	`{"unknown":[1,]}`, `{"payload":{"a":}}`, `{"payload":[01]}`, `{"payload":"\q"}`, `{"endpoint":"\u12"}`, "{\"endpoint\":\"\x01\"}",
	`{"success":true,"success":tru}`, `{"endpoint":1,"payload":[}`, `{"endpoint":"/e","\u0041":}`, `{"\u0041":1,"endpoint":1}`,
	"{\"endpoint\":\"\xff\",}", `{"payload":nulll}`, `{"since":nul}`, `{"timeout":null1}`,
}

func TestDecodersAgreeWithEncodingJSON(t *testing.T) {
	for _, s := range decodeTexts {
		checkDecodeToolCall(t, []byte(s))
		checkDecodeBusMessage(t, []byte(s))
		checkDecodeToolResponse(t, []byte(s))
	}
}

func TestDecodersEnforceDepthLimitInsideValues(t *testing.T) {
	for depth, ok := range map[int]bool{9998: true, 9999: true, 10000: false} {
		s := []byte(`{"payload":` + nested("[", "]", depth) + `,"result":1,"x":` + nested("[", "]", depth) + `}`)
		if _, err := checkDecodeToolCall(t, s); (err == nil) != ok {
			t.Errorf("DecodeToolCall with %d levels inside: %v, want ok=%v", depth, err, ok)
		}
		checkDecodeBusMessage(t, s)
		checkDecodeToolResponse(t, s)
	}
}

func TestDecodeToolCallReadsEveryField(t *testing.T) {
	var c protocol.ToolCall
	b := []byte(`{"correlation_id":"c1","endpoint":"/fs/read","payload":{"path":"/a b"},"timeout":2.5,` +
		`"reply_to":"inbox.7","deadline_ms":1700000000000,"wait_for_workspace_ms":5000,"async":true,"idempotency_key":"job-1"}`)
	if err := protocol.DecodeToolCall(b, &c); err != nil {
		t.Fatal(err)
	}
	want := protocol.ToolCall{CorrelationID: "c1", Endpoint: "/fs/read", Payload: json.RawMessage(`{"path":"/a b"}`),
		Timeout: 2.5, ReplyTo: "inbox.7", DeadlineMS: 1700000000000, WaitForWorkspaceMS: 5000, Async: true, IdempotencyKey: "job-1"}
	if !sameValue(c, want) {
		t.Errorf("got %+v, want %+v", c, want)
	}
}

func TestDecodeToolCallNullKeepsFieldsButSetsRawMessage(t *testing.T) {
	c, err := checkDecodeToolCall(t, []byte(`{"correlation_id":null,"timeout":null,"deadline_ms":null,"payload":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.CorrelationID != "old" || c.Timeout != 7 || c.DeadlineMS != 7 || string(c.Payload) != "null" {
		t.Errorf("got %+v; want old strings and numbers, payload null", c)
	}
}

func TestDecodeToolCallKeepsNegativeZeroTimeout(t *testing.T) {
	c, err := checkDecodeToolCall(t, []byte(`{"timeout":-0}`))
	if err != nil || !math.Signbit(c.Timeout) || c.Timeout != 0 {
		t.Errorf("timeout -0 decoded to %v (signbit %v), %v", c.Timeout, math.Signbit(c.Timeout), err)
	}
}

func TestDecodeToolCallRejectsNumbersEncodingJSONRejects(t *testing.T) {
	for _, s := range []string{`{"timeout":1e400}`, `{"deadline_ms":9223372036854775808}`, `{"deadline_ms":1.0}`,
		`{"deadline_ms":1e3}`, `{"wait_for_workspace_ms":-9223372036854775809}`, `{"timeout":01}`, `{"timeout":.5}`, `{"timeout":1.}`} {
		if c, err := checkDecodeToolCall(t, []byte(s)); err == nil {
			t.Errorf("DecodeToolCall(%s) = %+v, want an error", s, c)
		}
	}
}

func TestDecodeToolCallMatchesKeysIgnoringCase(t *testing.T) {
	c, err := checkDecodeToolCall(t, []byte(`{"CORRELATION_ID":"c1","Endpoint":"/e","DeadLine_Ms":3}`))
	if err != nil || c.CorrelationID != "c1" || c.Endpoint != "/e" || c.DeadlineMS != 3 {
		t.Errorf("got %+v, %v", c, err)
	}
}

func TestDecodeToolCallMatchesUnicodeFoldedAndEscapedKeys(t *testing.T) {
	// U+212A KELVIN SIGN folds to k; encoding/json matches it to "workspace".
	c, err := checkDecodeToolCall(t, []byte("{\"wait_for_wor\u212Aspace_ms\":5,\"\\u0065ndpoint\":\"/e\"}"))
	if err != nil || c.WaitForWorkspaceMS != 5 || c.Endpoint != "/e" {
		t.Errorf("got %+v, %v; want wait 5 and endpoint /e", c, err)
	}
	// U+017F LONG S folds to s.
	r, err := checkDecodeToolResponse(t, []byte(`{"\u017Fuccess":false,"message":"m"}`))
	if err != nil || r.Success || r.Message != "m" {
		t.Errorf("got %+v, %v; want success false", r, err)
	}
}

func TestDecodeToolCallLastDuplicateKeyWins(t *testing.T) {
	c, err := checkDecodeToolCall(t, []byte(`{"endpoint":"/a","payload":[1],"ENDPOINT":"/b","payload":{"x":2}}`))
	if err != nil || c.Endpoint != "/b" || string(c.Payload) != `{"x":2}` {
		t.Errorf("got %+v, %v", c, err)
	}
}

func TestDecodeToolCallUnquotesStringsLikeEncodingJSON(t *testing.T) {
	c, err := checkDecodeToolCall(t, []byte("{\"correlation_id\":\"\\u00e9\\ud83c\\udf89\\n\",\"endpoint\":\"/\xff\\ud800\"}"))
	if err != nil || c.CorrelationID != "é🎉\n" || c.Endpoint != "/\uFFFD\uFFFD" {
		t.Errorf("got %q %q, %v", c.CorrelationID, c.Endpoint, err)
	}
}

func TestDecodeToolCallPayloadAliasesInput(t *testing.T) {
	b := []byte(`{"payload":{"a":1},"endpoint":"/e"}`)
	var c protocol.ToolCall
	if err := protocol.DecodeToolCall(b, &c); err != nil {
		t.Fatal(err)
	}
	if &c.Payload[0] != &b[11] || cap(c.Payload) != len(c.Payload) {
		t.Errorf("payload %q does not alias the input with its capacity cut", c.Payload)
	}
}

// The slow path decodes into a value whose RawMessage aliases an earlier
// input; json.Unmarshal appends into a RawMessage's array, and must not
// write over that input.
func TestDecodeSlowPathDoesNotWriteIntoEarlierInput(t *testing.T) {
	first := []byte(`{"payload":[1,2,3,4,5,6]}`)
	var c protocol.ToolCall
	if err := protocol.DecodeToolCall(first, &c); err != nil {
		t.Fatal(err)
	}
	second := []byte(`{"\u0070ayload":7}`)
	if err := protocol.DecodeToolCall(second, &c); err != nil || string(c.Payload) != "7" {
		t.Fatalf("got %q, %v", c.Payload, err)
	}
	if string(first) != `{"payload":[1,2,3,4,5,6]}` {
		t.Errorf("the slow path wrote into the first input: %q", first)
	}
}

func TestDecodersRejectNonObjects(t *testing.T) {
	for _, s := range []string{``, ` `, `null`, `[]`, `"x"`, `1`, `true`, "\xef\xbb\xbf{}"} {
		if err := protocol.DecodeToolCall([]byte(s), new(protocol.ToolCall)); err == nil {
			t.Errorf("DecodeToolCall(%q) accepted a non-object", s)
		}
		if err := protocol.DecodeBusMessage([]byte(s), new(protocol.BusMessage)); err == nil {
			t.Errorf("DecodeBusMessage(%q) accepted a non-object", s)
		}
		if err := protocol.DecodeToolResponse([]byte(s), new(protocol.ToolResponse)); err == nil {
			t.Errorf("DecodeToolResponse(%q) accepted a non-object", s)
		}
	}
}

func TestDecodeBusMessageReadsEmbeddedCallAndControlFields(t *testing.T) {
	m, err := checkDecodeBusMessage(t, []byte(`{"type":"takeover","correlation_id":"c1","endpoint":"/e","timeout":5,`+
		`"reply_to":"r","deadline_ms":123,"reason":"why","holder":"h1","since":42}`))
	want := protocol.BusMessage{Type: protocol.BusTakeover, Reason: "why", Holder: "h1", Since: 42,
		ToolCall: protocol.ToolCall{CorrelationID: "c1", Endpoint: "/e", Timeout: 5, ReplyTo: "r", DeadlineMS: 123,
			Payload: json.RawMessage(`"old"`), WaitForWorkspaceMS: 7, Async: true, IdempotencyKey: "old"}}
	if err != nil || !sameValue(m, want) {
		t.Errorf("got %+v, %v; want %+v", m, err, want)
	}
}

func TestDecodeToolResponseReadsEveryField(t *testing.T) {
	var r protocol.ToolResponse
	err := protocol.DecodeToolResponse([]byte(`{"correlation_id":"c1","success":false,"result":[1],"error":"e","message":"m"}`), &r)
	want := protocol.ToolResponse{CorrelationID: "c1", Result: json.RawMessage(`[1]`), Error: "e", Message: "m"}
	if err != nil || !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v, %v; want %+v", r, err, want)
	}
}

// Values for every encoder: strings with every escape json.Marshal makes,
// timeouts on both sides of the exponent cutoffs.
var (
	encodeStrings = []string{
		"", "c1", "/fs/read", `quote " backslash \ slash /`, "<script>&amp;</script>", "\x00\x01\x07\b\f\n\r\t\x1f\x7f",
		"é€𝄞", "\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "\uFFFD", "ok\xe2\x80", "\xe2\x80\xa8x",
	}
	encodeTimeouts = []float64{
		0, math.Copysign(0, -1), 0.1, 1, 30, 600, -1, 2.5, 1.0 / 3, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 1.5e21, 123456789.125,
		999999999999999, 1e15, 1e16, 9007199254740993, -1e-10, math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324, 1e100,
	}
	encodeRaws = []string{
		"", `{}`, `[]`, `null`, `1`, `"<&>"`, `{"a":"\u2028","b":"` + "\u2028\u2029" + `"}`, `{"path":"/a","n":[1,2.5e10,true]}`,
		`"` + strings.Repeat("a<b>&c", 20) + `"`, `"abcdefg<"`, `"abcdefgh` + "\xe2\x80\xa8" + `"`, `"` + "\xe2\x80" + `"`,
		`"` + "\xe2\x80\xa9" + `"`, `"` + "\xe2\x81\xa8" + `"`,
	}
)

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// checkAppendMatchesMarshal asserts that append(prefix, v) writes what
// json.Marshal(v) does after the prefix.
func checkAppendMatchesMarshal[T any](t *testing.T, name string, v T, appendFn func([]byte, *T) []byte) []byte {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%+v): %v", v, err)
	}
	got := appendFn([]byte("prefix"), &v)
	if string(got[:6]) != "prefix" || !bytes.Equal(got[6:], want) {
		t.Errorf("%s(%+v) = %s, json.Marshal gives %s", name, v, got, want)
	}
	return got[6:]
}

func TestAppendToolCallMatchesMarshal(t *testing.T) {
	for _, s := range encodeStrings {
		for _, raw := range encodeRaws {
			c := protocol.ToolCall{CorrelationID: s, Endpoint: "/e" + s, Payload: rawOrNil(raw), Timeout: 30, ReplyTo: s}
			checkAppendMatchesMarshal(t, "AppendToolCall", c, protocol.AppendToolCall)
			c.Async, c.IdempotencyKey = true, "k"+s
			checkAppendMatchesMarshal(t, "AppendToolCall", c, protocol.AppendToolCall)
		}
	}
	for _, timeout := range encodeTimeouts {
		for _, n := range []int64{0, 1, -1, math.MaxInt64, math.MinInt64} {
			c := protocol.ToolCall{CorrelationID: "c", Timeout: timeout, DeadlineMS: n, WaitForWorkspaceMS: -n}
			checkAppendMatchesMarshal(t, "AppendToolCall", c, protocol.AppendToolCall)
			c.Timeout = -timeout
			checkAppendMatchesMarshal(t, "AppendToolCall", c, protocol.AppendToolCall)
		}
	}
}

func TestAppendToolCallWritesEmptyPayloadAsOmitted(t *testing.T) {
	c := protocol.ToolCall{CorrelationID: "c", Endpoint: "/e", Payload: json.RawMessage{}, Timeout: 1}
	if got := string(checkAppendMatchesMarshal(t, "AppendToolCall", c, protocol.AppendToolCall)); got != `{"correlation_id":"c","endpoint":"/e","timeout":1}` {
		t.Errorf("got %s", got)
	}
}

func TestAppendToolCallWritesNonFiniteTimeoutAsNull(t *testing.T) {
	for _, timeout := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		c := protocol.ToolCall{CorrelationID: "c", Endpoint: "/e", Timeout: timeout}
		got := protocol.AppendToolCall(nil, &c)
		if string(got) != `{"correlation_id":"c","endpoint":"/e","timeout":null}` {
			t.Errorf("timeout %v: got %s", timeout, got)
		}
	}
}

func TestAppendBusMessageMatchesMarshal(t *testing.T) {
	for _, s := range encodeStrings {
		for _, raw := range encodeRaws[:4] {
			m := protocol.BusMessage{Type: s, Reason: s, Holder: "h" + s, Since: 1700000000123456789,
				ToolCall: protocol.ToolCall{CorrelationID: s, Endpoint: "/e", Payload: rawOrNil(raw), Timeout: 0.5, ReplyTo: "r", DeadlineMS: 12, WaitForWorkspaceMS: 34, Async: true, IdempotencyKey: s}}
			checkAppendMatchesMarshal(t, "AppendBusMessage", m, protocol.AppendBusMessage)
		}
	}
	for _, m := range []protocol.BusMessage{
		{},
		{Type: protocol.BusCancel, ToolCall: protocol.ToolCall{CorrelationID: "c9"}, Reason: "caller gone"},
		{Type: protocol.BusTakeover, Holder: "b1", Since: -5},
	} {
		checkAppendMatchesMarshal(t, "AppendBusMessage", m, protocol.AppendBusMessage)
	}
}

func TestAppendToolResponseMatchesMarshal(t *testing.T) {
	for _, s := range encodeStrings {
		for _, raw := range encodeRaws {
			for _, ok := range []bool{true, false} {
				r := protocol.ToolResponse{CorrelationID: s, Success: ok, Result: rawOrNil(raw), Error: s, Message: "m" + s}
				checkAppendMatchesMarshal(t, "AppendToolResponse", r, protocol.AppendToolResponse)
			}
		}
	}
	checkAppendMatchesMarshal(t, "AppendToolResponse", protocol.ToolResponse{}, protocol.AppendToolResponse)
	checkAppendMatchesMarshal(t, "AppendToolResponse", protocol.Failure("c", protocol.CodeTimeout, "late"), protocol.AppendToolResponse)
}

// Whitespace inside a RawMessage is kept (json.Marshal would compact it):
// the output is still valid and decodes to the same value.
func TestAppendToolResponseKeepsWhitespaceOfResult(t *testing.T) {
	r := protocol.ToolResponse{CorrelationID: "c", Success: true, Result: json.RawMessage("{ \"a\" : [ 1 ] , \"b\":\"<\" }")}
	got := protocol.AppendToolResponse(nil, &r)
	if string(got) != `{"correlation_id":"c","success":true,"result":{ "a" : [ 1 ] , "b":"\u003c" }}` {
		t.Errorf("got %s", got)
	}
	back, err := checkDecodeToolResponse(t, got)
	if err != nil || !sameJSON(t, back.Result, r.Result) {
		t.Errorf("decoded %s back to %+v, %v", got, back, err)
	}
}

func TestAppendThenDecodeRoundTrips(t *testing.T) {
	c := protocol.ToolCall{CorrelationID: "c<1>", Endpoint: "/fs/read", Payload: json.RawMessage(`{"path":"/a\u0026b"}`),
		Timeout: 0.25, ReplyTo: "inbox", DeadlineMS: -3, WaitForWorkspaceMS: 9, Async: true, IdempotencyKey: "job/1 <&>"}
	var back protocol.ToolCall
	if err := protocol.DecodeToolCall(protocol.AppendToolCall(nil, &c), &back); err != nil || !sameValue(back, c) {
		t.Errorf("round trip of %+v = %+v, %v", c, back, err)
	}
}
