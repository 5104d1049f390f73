package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

// Seeds: every documented example, plus the edges the unit tests pin down.
var sioFuzzSeeds = []string{
	``, `7`, `2[]`, `2[null]`, `2[1]`, `1{}`, `0[]`, `5["a"]`, `5-["a"]`,
	`2/admin`, `1/admin`, `2/,5["a"]`, `2007["a"]`, `20["a"]`, `4"oops"`, "2 [\"a\"]\n",
	`29007199254740991["a"]`, `29007199254740992["a"]`, `29223372036854775808["a"]`,
	`59007199254740992-["a"]`, `50-["a"]`, `2["\u00e9\ud83c\udf89",{"k":[1,2.5e10,null,true]}]`,
}

func FuzzDecodeSIO(f *testing.F) {
	for _, ex := range sioSpecExamples {
		f.Add([]byte(ex.wire))
	}
	for _, s := range sioFuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := bytes.Clone(b)
		p, err := protocol.DecodeSIO(b)
		if !bytes.Equal(in, b) {
			t.Fatalf("DecodeSIO changed its input %q to %q", in, b)
		}
		if err != nil {
			if !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("DecodeSIO(%q) error %v does not wrap ErrMalformed", b, err)
			}
			return
		}
		checkSIOInvariants(t, b, p)

		wire := protocol.AppendSIO(nil, p)
		p2, err := protocol.DecodeSIO(wire)
		if err != nil {
			t.Fatalf("DecodeSIO(%q) = %+v, but its re-encoding %q does not decode: %v", b, p, wire, err)
		}
		if !sioEqual(p, p2) {
			t.Fatalf("round trip changed the packet: %q -> %+v -> %q -> %+v", b, p, wire, p2)
		}
		if again := protocol.AppendSIO(nil, p2); !bytes.Equal(again, wire) {
			t.Fatalf("encoding is not stable: %q then %q", wire, again)
		}
	})
}

func checkSIOInvariants(t *testing.T, b []byte, p protocol.SIOPacket) {
	t.Helper()
	if p.Type < protocol.SIOConnect || p.Type > protocol.SIOBinaryAck {
		t.Fatalf("DecodeSIO(%q): type %v out of range", b, p.Type)
	}
	if p.Namespace == "" || p.Namespace[0] != '/' || bytes.IndexByte([]byte(p.Namespace), ',') >= 0 {
		t.Fatalf("DecodeSIO(%q): namespace %q", b, p.Namespace)
	}
	if p.ID != protocol.NoAck && (p.ID < 0 || p.ID > largestAckID) {
		t.Fatalf("DecodeSIO(%q): ack id %d out of range", b, p.ID)
	}
	binary := p.Type == protocol.SIOBinaryEvent || p.Type == protocol.SIOBinaryAck
	if p.Attachments < 0 || p.Attachments > largestAckID || (!binary && p.Attachments != 0) {
		t.Fatalf("DecodeSIO(%q): %d attachments on a %v", b, p.Attachments, p.Type)
	}
	if p.Data != nil && !json.Valid(p.Data) {
		t.Fatalf("DecodeSIO(%q): Data %q is not valid JSON", b, p.Data)
	}
	switch p.Type {
	case protocol.SIODisconnect:
		if p.Data != nil {
			t.Fatalf("DecodeSIO(%q): DISCONNECT with data %q", b, p.Data)
		}
	case protocol.SIOEvent, protocol.SIOBinaryEvent:
		args, err := p.Args()
		if err != nil || len(args) == 0 || args[0][0] != '"' {
			t.Fatalf("DecodeSIO(%q): EVENT args %q, %v; want a string name first", b, args, err)
		}
		if _, err := p.EventName(); err != nil {
			t.Fatalf("DecodeSIO(%q): EventName: %v", b, err)
		}
	case protocol.SIOAck, protocol.SIOBinaryAck:
		if _, err := p.Args(); err != nil {
			t.Fatalf("DecodeSIO(%q): ACK Args: %v", b, err)
		}
	}
}

func FuzzDecodeEIO(f *testing.F) {
	for _, s := range []string{
		``, `0{"sid":"lv_VI97HAXpY6yYWAAAC","upgrades":["websocket"],"pingInterval":25000,"pingTimeout":5000,"maxPayload":1000000}`,
		`1`, `2`, `3`, `2probe`, `3probe`, `4hello`, `4€€€`, `5`, `6`, `7`, `b4AQID`, `42["hello"]`, `461-/admin,1[{"_placeholder":true,"num":0}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, err := protocol.DecodeEIO(frame)
		if err != nil {
			if !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("DecodeEIO(%q) error %v does not wrap ErrMalformed", frame, err)
			}
			return
		}
		if p.Type < protocol.EIOOpen || p.Type > protocol.EIONoop || p.Binary {
			t.Fatalf("DecodeEIO(%q) = %+v", frame, p)
		}
		if got := protocol.AppendEIO(nil, p.Type, p.Data); !bytes.Equal(got, frame) {
			t.Fatalf("AppendEIO(DecodeEIO(%q)) = %q", frame, got)
		}
		if p.Type == protocol.EIOOpen {
			info, err := protocol.DecodeOpen(p.Data)
			if err != nil {
				if !errors.Is(err, protocol.ErrMalformed) {
					t.Fatalf("DecodeOpen(%q) error %v does not wrap ErrMalformed", p.Data, err)
				}
				return
			}
			if info.SID == "" {
				t.Fatalf("DecodeOpen(%q) accepted an empty sid", p.Data)
			}
			re, err := protocol.DecodeOpen(protocol.EncodeOpen(info)[1:])
			if err != nil || re.SID != info.SID || re.PingInterval != info.PingInterval ||
				re.PingTimeout != info.PingTimeout || re.MaxPayload != info.MaxPayload || len(re.Upgrades) != len(info.Upgrades) {
				t.Fatalf("open round trip: %+v -> %+v, %v", info, re, err)
			}
		}
	})
}

func FuzzDecodePayload(f *testing.F) {
	for _, s := range []string{
		"", "\x1e", "4hello\x1e4world", "4hello\x1e4€€€", "4hello\x1ebAQID", "42[\"hello\"]\x1e42[\"world\"]",
		"2\x1e3\x1e6", "4a\x1e\x1e4b", "4a\x1e",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		ps, err := protocol.DecodePayload(payload)
		if err != nil {
			if !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("DecodePayload(%q) error %v does not wrap ErrMalformed", payload, err)
			}
			return
		}
		if want := bytes.Count(payload, []byte{protocol.PayloadSeparator}) + 1; len(ps) != want {
			t.Fatalf("DecodePayload(%q) = %d packets, want %d", payload, len(ps), want)
		}
		var joined []byte
		for i, p := range ps {
			if i > 0 {
				joined = append(joined, protocol.PayloadSeparator)
			}
			joined = protocol.AppendEIO(joined, p.Type, p.Data)
		}
		if !bytes.Equal(joined, payload) {
			t.Fatalf("re-joined payload %q != %q", joined, payload)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `"x"`, `{"success":false}`, `{"correlation_id":"c1"}`,
		`{"correlation_id":"c1","success":true,"result":{"lines":["ü",1]}}`,
		`{"correlation_id":"c2","success":false,"error":"unknown_route","message":"no route"}`,
		`{"result":null}`, `{"success":"yes"}`, `{} {}`, ` {"message":"m"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		resp, ok, err := protocol.DecodeResponse(raw)
		if err != nil {
			if ok || !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("DecodeResponse(%q) = ok=%v, error %v; want !ok and ErrMalformed", raw, ok, err)
			}
			return
		}
		if !ok {
			if resp.Success || resp.Error != "" || resp.Message != "" || resp.Result != nil {
				t.Fatalf("DecodeResponse(%q) = %+v counted as no answer", raw, resp)
			}
			return
		}
		if resp.Success != (resp.Err() == nil) {
			t.Fatalf("DecodeResponse(%q): Success %v but Err() = %v", raw, resp.Success, resp.Err())
		}
		// What the broker forwards must decode to the same answer.
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatalf("marshal %+v: %v", resp, err)
		}
		re, ok, err := protocol.DecodeResponse(b)
		if err != nil || !ok {
			t.Fatalf("DecodeResponse(Marshal(%+v) = %s) = ok=%v, %v", resp, b, ok, err)
		}
		if re.CorrelationID != resp.CorrelationID || re.Success != resp.Success || re.Error != resp.Error ||
			re.Message != resp.Message || !sameJSON(t, re.Result, resp.Result) {
			t.Fatalf("response round trip: %+v -> %s -> %+v", resp, b, re)
		}
	})
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if (a == nil) != (b == nil) {
		return false
	}
	if a == nil {
		return true
	}
	var va, vb any
	da := json.NewDecoder(bytes.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(bytes.NewReader(b))
	db.UseNumber()
	if err := da.Decode(&va); err != nil {
		t.Fatalf("%q is not JSON: %v", a, err)
	}
	if err := db.Decode(&vb); err != nil {
		t.Fatalf("%q is not JSON: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func FuzzBinaryAssembler(f *testing.F) {
	for _, s := range []struct {
		header string
		a0, a1 []byte
	}{
		{`51-["baz",{"_placeholder":true,"num":0}]`, []byte{1, 2, 3, 4}, nil},
		{`52-/admin,["baz",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]`, []byte{1, 2}, []byte{3, 4}},
		{`61-/admin,456[{"_placeholder":true,"num":0}]`, []byte{0xff}, nil},
		{`51-14["foo",{"_placeholder":true,"num":0}]`, []byte("x"), nil},
		{`51-[{"_placeholder":true,"num":0}]`, []byte("name"), nil},
		{`51-["e",{"_placeholder":true,"num":1}]`, []byte("a"), nil},
		{`52-["e",{"a":[{"_placeholder":true,"num":1}]},12345678901234567890,1e400]`, []byte("a"), []byte("b")},
		{`50-["e",{"_placeholder":true,"num":0}]`, nil, nil},
		{`51-["e",{"_placeholder":true,"num":0.0},{"_placeholder":true,"num":-0}]`, []byte("a"), nil},
	} {
		f.Add(s.header, s.a0, s.a1)
	}
	f.Fuzz(func(t *testing.T, header string, a0, a1 []byte) {
		h, err := protocol.DecodeSIO([]byte(header))
		if err != nil || (h.Type != protocol.SIOBinaryEvent && h.Type != protocol.SIOBinaryAck) || h.Attachments > 2 {
			return
		}
		frames := [][]byte{a0, a1}[:h.Attachments]
		var a protocol.BinaryAssembler
		done := a.Start(h)
		for _, fr := range frames {
			done = a.Add(fr)
		}
		if !done || a.Active() {
			t.Fatalf("%q: not done after %d attachments", header, len(frames))
		}
		p, raw, err := a.Packet()
		if err != nil {
			if !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("Packet(%q) error %v does not wrap ErrMalformed", header, err)
			}
			return
		}
		wantType := protocol.SIOEvent
		if h.Type == protocol.SIOBinaryAck {
			wantType = protocol.SIOAck
		}
		if p.Type != wantType || p.Namespace != h.Namespace || p.ID != h.ID || p.Attachments != 0 {
			t.Fatalf("Packet(%q) = %+v, want %v in %q with id %d", header, p, wantType, h.Namespace, h.ID)
		}
		if len(raw) != len(frames) {
			t.Fatalf("Packet(%q) returned %d attachments, want %d", header, len(raw), len(frames))
		}
		for i := range raw {
			if !bytes.Equal(raw[i], frames[i]) {
				t.Fatalf("attachment %d = %q, want %q", i, raw[i], frames[i])
			}
		}
		if !json.Valid(p.Data) {
			t.Fatalf("Packet(%q) Data %q is not valid JSON", header, p.Data)
		}
		if hasPlaceholder(t, p.Data) {
			t.Fatalf("Packet(%q) Data %s still holds a placeholder", header, p.Data)
		}
		// The assembled packet is an ordinary EVENT or ACK and must pass the
		// same validation a text packet does.
		wire := protocol.AppendSIO(nil, p)
		if _, err := protocol.DecodeSIO(wire); err != nil {
			t.Fatalf("assembled packet %q does not decode: %v", wire, err)
		}
	})
}

func hasPlaceholder(t *testing.T, data []byte) bool {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%q is not JSON: %v", data, err)
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case map[string]any:
			if ph, ok := x["_placeholder"].(bool); ok && ph {
				return true
			}
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// Realistic messages for the fast codec's fuzz targets: what callers, bridges
// and brokers put on the wire and on the bus.
var jsonMessageSeeds = []string{
	`{"correlation_id":"0b9d6f3e-5c1a-4f7e-9a2b-8d4c3e2f1a0b","endpoint":"/fs/read","payload":{"path":"/workspace/src/main.go","offset":0,"limit":65536},"timeout":30}`,
	`{"correlation_id":"c1","endpoint":"/git/status","timeout":0.5,"reply_to":"reply:b1","deadline_ms":1767225600000,"wait_for_workspace_ms":5000}`,
	`{"endpoint":"/api/terminal/execute","payload":{"command":"make"},"timeout":35,"async":true,"idempotency_key":"job-42/step-1"}`,
	`{"type":"drain","correlation_id":"","endpoint":"","timeout":0}`,
	`{"correlation_id":"c7","endpoint":"/dap/launch","timeout":60,"reply_to":"reply:a1","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
	`{"traceparent":null}`, `{"TraceParent":"x"}`, `{"traceparent":["00"]}`,
	`{"async":1}`, `{"async":"true"}`, `{"ASYNC":false,"Idempotency_Key":null}`, `{"idempotency_key":7}`,
	`{"type":"cancel","correlation_id":"c9","endpoint":"","timeout":0,"reason":"caller gone"}`,
	`{"type":"takeover","correlation_id":"","endpoint":"","timeout":0,"holder":"b2:conn17","since":1767225600123456789}`,
	`{"correlation_id":"c1","success":true,"result":{"content":"package main\n\nimport \"fmt\"\n","size":27,"truncated":false}}`,
	`{"correlation_id":"c2","success":false,"error":"unknown_route","message":"no route for /x <y> & z"}`,
	`{"correlation_id":"c3","success":true,"result":[1,-0,2.5e-10,1e400,null,true,"\u00e9\ud83c\udf89"]}`,
	` { "CORRELATION_ID" : "c4" , "Success" : true , "result" : null } `,
	`{"\u0065ndpoint":"/e","wait_for_wor` + "\u212a" + `space_ms":5,"` + "\u017f" + `ince":1}`,
	`{"deadline_ms":9223372036854775808,"timeout":-0}`, `{"endpoint":"\ud800\xff"}`, `{"payload":[[[[]]]]}`,
	`{"timeout":"30"}`, `{"success":"true"}`, `{} x`, `null`, `[]`, ``,
}

func FuzzValid(f *testing.F) {
	for _, s := range append(append(append([]string{}, jsonMessageSeeds...), validJSONTexts...), invalidJSONTexts...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkValidMatches(t, b)
	})
}

func FuzzSplitArray(f *testing.F) {
	for _, s := range append(append(append([]string{}, validJSONTexts...), invalidJSONTexts...), sioFuzzSeeds...) {
		f.Add([]byte(s))
	}
	for _, s := range jsonMessageSeeds {
		f.Add([]byte(`["tool_response",` + s + `]`))
		f.Add([]byte(`[` + s + `,` + s + `]`))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSplitArrayMatches(t, b)
	})
}

func addDecodeSeeds(f *testing.F) {
	for _, s := range append(append([]string{}, jsonMessageSeeds...), decodeTexts...) {
		f.Add([]byte(s))
	}
}

func FuzzDecodeToolCall(f *testing.F) {
	addDecodeSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeToolCall(t, b) })
}

// FuzzDecodeCallRequest holds the caller API's strict body decoder to
// encoding/json with DisallowUnknownFields.
func FuzzDecodeCallRequest(f *testing.F) {
	addDecodeSeeds(f)
	for _, s := range []string{`{"endpoint":"/api/ping","timout":5}`, `{"endpoint":"/e","reply_to":"x"}`, `{"\u0074imeout":1,"x":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeCallRequest(t, b) })
}

func FuzzDecodeBusMessage(f *testing.F) {
	addDecodeSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeBusMessage(t, b) })
}

func FuzzDecodeToolResponse(f *testing.F) {
	addDecodeSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeToolResponse(t, b) })
}

// marshalRaw returns raw as a RawMessage field if it is one the encoders
// promise to write as json.Marshal does (valid JSON without whitespace
// between tokens), nil otherwise.
func marshalRaw(raw []byte) json.RawMessage {
	if len(raw) == 0 || !json.Valid(raw) {
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil || !bytes.Equal(compact.Bytes(), raw) {
		return nil
	}
	return raw
}

// checkAppendMarshals asserts that the encoder writes json.Marshal's bytes
// after what dst held, or, for a non-finite timeout json.Marshal refuses,
// valid JSON with a null timeout.
func checkAppendMarshals[T any](t *testing.T, name string, v T, appendFn func([]byte, *T) []byte, timeout float64) {
	t.Helper()
	got := appendFn([]byte("{}"), &v)
	if string(got[:2]) != "{}" {
		t.Fatalf("%s overwrote dst: %q", name, got)
	}
	got = got[2:]
	want, err := json.Marshal(v)
	if math.IsNaN(timeout) || math.IsInf(timeout, 0) {
		if err == nil || !json.Valid(got) || !bytes.Contains(got, []byte(`"timeout":null`)) {
			t.Fatalf("%s(%+v) = %s, want valid JSON with a null timeout", name, v, got)
		}
		return
	}
	if err != nil {
		t.Fatalf("json.Marshal(%+v): %v", v, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s(%+v) = %s, json.Marshal gives %s", name, v, got, want)
	}
}

func FuzzAppendToolCall(f *testing.F) {
	f.Add("0b9d6f3e-5c1a-4f7e-9a2b-8d4c3e2f1a0b", "/fs/read", []byte(`{"path":"/a","limit":65536}`), 30.0, "", int64(0), int64(0), false, "")
	f.Add("c<1>&", "/e\u2028", []byte(`"<\u2028>"`+"\u2029"), 0.1, "reply:b1", int64(1767225600000), int64(5000), true, "job<1>&\u2028")
	f.Add("\xff\x00\n", "", []byte(`[1,2,{"a":null}]`), 1e21, "r\"\\", int64(-1), int64(math.MaxInt64), false, "\xff")
	f.Add("", "/x", []byte(` { } `), 1e-7, "", int64(math.MinInt64), int64(0), true, "")
	f.Add("c", "/x", []byte(nil), math.Copysign(0, -1), "", int64(0), int64(0), false, "k")
	f.Fuzz(func(t *testing.T, id, endpoint string, payload []byte, timeout float64, replyTo string, deadline, wait int64, async bool, key string) {
		c := protocol.ToolCall{CorrelationID: id, Endpoint: endpoint, Payload: marshalRaw(payload), Timeout: timeout,
			ReplyTo: replyTo, DeadlineMS: deadline, WaitForWorkspaceMS: wait, Async: async, IdempotencyKey: key}
		checkAppendMarshals(t, "AppendToolCall", c, protocol.AppendToolCall, timeout)
	})
}

func FuzzAppendBusMessage(f *testing.F) {
	f.Add("", "c1", "/fs/read", []byte(`{"path":"/a"}`), 30.0, "reply:b1", int64(1767225600000), int64(0), false, "", "", "", int64(0))
	f.Add("cancel", "c9", "", []byte(nil), 0.0, "", int64(0), int64(0), false, "", "caller gone <now>", "", int64(0))
	f.Add("takeover", "", "", []byte(nil), 0.0, "", int64(0), int64(0), false, "", "", "b2:conn17", int64(1767225600123456789))
	f.Add("drain", "", "", []byte(nil), 0.0, "", int64(0), int64(0), true, "k&1", "", "", int64(0))
	f.Add("\u2028", "\xed\xa0\x80", "&", []byte(`"\u0026"`), 123456789.125, "\t", int64(-7), int64(7), true, "\u2029", "\x7f", "\xc3", int64(-1))
	f.Fuzz(func(t *testing.T, typ, id, endpoint string, payload []byte, timeout float64, replyTo string, deadline, wait int64,
		async bool, key, reason, holder string, since int64) {
		m := protocol.BusMessage{Type: typ, Reason: reason, Holder: holder, Since: since,
			ToolCall: protocol.ToolCall{CorrelationID: id, Endpoint: endpoint, Payload: marshalRaw(payload), Timeout: timeout,
				ReplyTo: replyTo, DeadlineMS: deadline, WaitForWorkspaceMS: wait, Async: async, IdempotencyKey: key}}
		checkAppendMarshals(t, "AppendBusMessage", m, protocol.AppendBusMessage, timeout)
	})
}

func FuzzAppendToolResponse(f *testing.F) {
	f.Add("c1", true, []byte(`{"content":"package main\n\nimport \"fmt\"\n","size":27}`), "", "")
	f.Add("c2", false, []byte(nil), "unknown_route", "no route for /x <y> & z")
	f.Add("c3", true, []byte(`["<script>","\u2028`+"\u2028\u2029"+`",1e400,-0]`), "", "")
	f.Add("\xff", false, []byte(`null`), "\x01", "\u2029\ufffd")
	f.Fuzz(func(t *testing.T, id string, success bool, result []byte, code, message string) {
		r := protocol.ToolResponse{CorrelationID: id, Success: success, Result: marshalRaw(result), Error: code, Message: message}
		checkAppendMarshals(t, "AppendToolResponse", r, protocol.AppendToolResponse, 0)
	})
}
