package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

// largestAckID is the largest ack id the decoder accepts (2^53-1, the largest
// integer a JavaScript peer can count to exactly).
const largestAckID = 1<<53 - 1

func sioEqual(a, b protocol.SIOPacket) bool {
	return a.Type == b.Type && a.Namespace == b.Namespace && a.ID == b.ID &&
		a.Attachments == b.Attachments && bytes.Equal(a.Data, b.Data) && (a.Data == nil) == (b.Data == nil)
}

func mustDecodeSIO(t *testing.T, wire string) protocol.SIOPacket {
	t.Helper()
	p, err := protocol.DecodeSIO([]byte(wire))
	if err != nil {
		t.Fatalf("DecodeSIO(%q): %v", wire, err)
	}
	return p
}

func TestSIOPacketRoundTripsEveryTypeNamespaceAndAckID(t *testing.T) {
	payloads := map[protocol.SIOType][]string{
		protocol.SIOConnect:      {"", `{}`, `{"token":"abc","n":[1,2]}`},
		protocol.SIODisconnect:   {""},
		protocol.SIOEvent:        {`["tool_call"]`, `["tool_call",{"a":1},"x",null]`},
		protocol.SIOAck:          {`[]`, `[{"correlation_id":"c1","success":true}]`},
		protocol.SIOConnectError: {`{"message":"Not authorized"}`, `"plain string"`},
		protocol.SIOBinaryEvent:  {`["up",{"_placeholder":true,"num":0}]`},
		protocol.SIOBinaryAck:    {`[{"_placeholder":true,"num":0}]`, `[]`},
	}
	for typ, datas := range payloads {
		for _, ns := range []string{"/", "/admin", "/a/b-c_d.e"} {
			for _, id := range []int64{protocol.NoAck, 0, 1, 42, largestAckID} {
				for _, data := range datas {
					in := protocol.SIOPacket{Type: typ, Namespace: ns, ID: id}
					if data != "" {
						in.Data = json.RawMessage(data)
					}
					if typ == protocol.SIOBinaryEvent || typ == protocol.SIOBinaryAck {
						in.Attachments = 3
					}
					wire := protocol.AppendSIO(nil, in)
					out, err := protocol.DecodeSIO(wire)
					if err != nil {
						t.Errorf("DecodeSIO(AppendSIO(%+v) = %q): %v", in, wire, err)
						continue
					}
					if !sioEqual(in, out) {
						t.Errorf("round trip of %q: got %+v, want %+v", wire, out, in)
					}
				}
			}
		}
	}
}

func TestDecodeSIOWithoutAckIDReportsNoAck(t *testing.T) {
	for _, wire := range []string{`2["a"]`, `2/admin,["a"]`, `0`, `1/admin,`, `51-["a",{"_placeholder":true,"num":0}]`} {
		p := mustDecodeSIO(t, wire)
		if p.ID != protocol.NoAck || p.HasAck() {
			t.Errorf("%q: ID = %d, HasAck = %v; want NoAck, false", wire, p.ID, p.HasAck())
		}
	}
}

func TestDecodeSIOAckIDZeroIsAnAck(t *testing.T) {
	p := mustDecodeSIO(t, `20["a"]`)
	if p.ID != 0 || !p.HasAck() {
		t.Fatalf("ID = %d, HasAck = %v; want 0, true", p.ID, p.HasAck())
	}
	if got := protocol.AppendSIO(nil, p); string(got) != `20["a"]` {
		t.Errorf("AppendSIO = %q, want %q", got, `20["a"]`)
	}
}

func TestDecodeSIOAcceptsLargestAckID(t *testing.T) {
	wire := "3/admin," + strconv.FormatInt(largestAckID, 10) + "[]"
	p := mustDecodeSIO(t, wire)
	if p.ID != largestAckID {
		t.Fatalf("ID = %d, want %d", p.ID, int64(largestAckID))
	}
	if got := protocol.AppendSIO(nil, p); string(got) != wire {
		t.Errorf("AppendSIO = %q, want %q", got, wire)
	}
}

func TestDecodeSIOIgnoresLeadingZerosInAckID(t *testing.T) {
	p := mustDecodeSIO(t, `2007["a"]`)
	if p.ID != 7 {
		t.Fatalf("ID = %d, want 7", p.ID)
	}
}

// socket.io-parser reads a namespace up to the first comma or the end of the
// packet, so "1/admin" is a DISCONNECT from /admin.
func TestDecodeSIONamespaceWithoutCommaRunsToEnd(t *testing.T) {
	p := mustDecodeSIO(t, `1/admin`)
	if p.Type != protocol.SIODisconnect || p.Namespace != "/admin" || p.Data != nil {
		t.Fatalf("got %+v, want DISCONNECT /admin without data", p)
	}
	if got := protocol.AppendSIO(nil, p); string(got) != `1/admin,` {
		t.Errorf("AppendSIO = %q, want %q", got, `1/admin,`)
	}
}

func TestDecodeSIOExplicitRootNamespaceIsDefault(t *testing.T) {
	p := mustDecodeSIO(t, `2/,5["a"]`)
	if p.Namespace != "/" || p.ID != 5 {
		t.Fatalf("Namespace, ID = %q, %d; want \"/\", 5", p.Namespace, p.ID)
	}
}

func TestAppendSIOOmitsDefaultNamespace(t *testing.T) {
	for _, ns := range []string{"", "/"} {
		got := protocol.AppendSIO(nil, protocol.SIOPacket{Type: protocol.SIOEvent, Namespace: ns, ID: 3, Data: json.RawMessage(`["x"]`)})
		if string(got) != `23["x"]` {
			t.Errorf("namespace %q: AppendSIO = %q, want %q", ns, got, `23["x"]`)
		}
	}
}

func TestAppendSIOAppendsToDst(t *testing.T) {
	dst := []byte("prefix:")
	got := protocol.AppendSIO(dst, protocol.SIOPacket{Type: protocol.SIOAck, ID: 9, Data: json.RawMessage(`[]`)})
	if string(got) != `prefix:39[]` {
		t.Errorf("AppendSIO = %q, want %q", got, `prefix:39[]`)
	}
}

func TestDecodeSIOAcceptsWhitespaceAroundJSONPayload(t *testing.T) {
	for _, wire := range []string{"2 [\"a\"]", "2[ \"a\" , 1 ]\n", "3/x,1 []", "0\t{}", `4 "oops"`} {
		if _, err := protocol.DecodeSIO([]byte(wire)); err != nil {
			t.Errorf("DecodeSIO(%q): %v", wire, err)
		}
	}
}

func TestDecodeSIOAcceptsConnectErrorWithStringPayload(t *testing.T) {
	p := mustDecodeSIO(t, `4"Not authorized"`)
	if p.Type != protocol.SIOConnectError || string(p.Data) != `"Not authorized"` {
		t.Fatalf("got %+v", p)
	}
}

func TestSIOPacketArgsSplitsArray(t *testing.T) {
	p := mustDecodeSIO(t, `2["ev",{"a":[1,2]},"s",null,3.5]`)
	args, err := p.Args()
	if err != nil {
		t.Fatalf("Args: %v", err)
	}
	want := []string{`"ev"`, `{"a":[1,2]}`, `"s"`, `null`, `3.5`}
	if len(args) != len(want) {
		t.Fatalf("got %d args, want %d", len(args), len(want))
	}
	for i := range want {
		if string(args[i]) != want[i] {
			t.Errorf("arg %d = %s, want %s", i, args[i], want[i])
		}
	}
}

func TestSIOPacketArgsRejectsNonArray(t *testing.T) {
	p := protocol.SIOPacket{Type: protocol.SIOAck, Data: json.RawMessage(`{"a":1}`)}
	if _, err := p.Args(); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("Args error = %v, want ErrMalformed", err)
	}
}

// null unmarshals into a nil []json.RawMessage without error, but it is no
// argument list.
func TestSIOPacketArgsRejectsNull(t *testing.T) {
	p := protocol.SIOPacket{Type: protocol.SIOAck, Data: json.RawMessage(`null`)}
	if args, err := p.Args(); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("Args = %q, %v; want ErrMalformed", args, err)
	}
}

func TestDecodeSIOUnescapesEventName(t *testing.T) {
	for wire, want := range map[string]string{
		`2["tool\u005fcall"]`: protocol.EventToolCall,
		`2["tool_call"]`:      protocol.EventToolCall,
		`2["\u00e9v\n"]`:      "\u00e9v\n",
		"2[\"\xffx\"]":        "\ufffdx",
		`2["",1]`:             "",
	} {
		p := mustDecodeSIO(t, wire)
		if name, err := p.EventName(); err != nil || name != want {
			t.Errorf("EventName of %q = %q, %v; want %q", wire, name, err, want)
		}
	}
}

func TestEncodeEventRoundTripsNameAndArgs(t *testing.T) {
	names := []string{
		protocol.EventToolCall, protocol.EventToolResponse, protocol.EventToolCancel,
		"", "héllo wörld", "日本語", "emoji 🎉", `quote"and\backslash`, "new\nline\ttab",
		"<script>&amp;</script>", "a,b/c", "123", "/admin,", "\u2028\u2029", "\x00nul",
	}
	args := []json.RawMessage{
		json.RawMessage(`{"endpoint":"/fs/read","payload":{"path":"/ü/é.txt"}}`),
		json.RawMessage(`[1,2,{"k":"v"}]`),
		json.RawMessage(`"str \"q\" \u00e9"`),
		json.RawMessage(`null`),
		json.RawMessage(`-12.5e3`),
		json.RawMessage(`true`),
	}
	for _, name := range names {
		for _, id := range []int64{protocol.NoAck, 0, 7, largestAckID} {
			frame := protocol.EncodeEvent(id, name, args...)
			e, err := protocol.DecodeEIO(frame)
			if err != nil || e.Type != protocol.EIOMessage {
				t.Fatalf("DecodeEIO(%q) = %v, %v; want a message", frame, e.Type, err)
			}
			p, err := protocol.DecodeSIO(e.Data)
			if err != nil {
				t.Fatalf("DecodeSIO(%q): %v", e.Data, err)
			}
			if p.Type != protocol.SIOEvent || p.Namespace != "/" || p.ID != id {
				t.Errorf("%q: got type %v ns %q id %d; want EVENT / %d", frame, p.Type, p.Namespace, p.ID, id)
			}
			got, err := p.EventName()
			if err != nil || got != name {
				t.Errorf("%q: EventName = %q, %v; want %q", frame, got, err, name)
			}
			gotArgs, err := p.Args()
			if err != nil {
				t.Fatalf("Args: %v", err)
			}
			if len(gotArgs) != len(args)+1 {
				t.Fatalf("%q: %d args, want %d", frame, len(gotArgs), len(args)+1)
			}
			for i, a := range args {
				if !bytes.Equal(gotArgs[i+1], a) {
					t.Errorf("%q: arg %d = %s, want %s", frame, i, gotArgs[i+1], a)
				}
			}
		}
	}
}

func TestEncodeEventWithoutAckIDOmitsIt(t *testing.T) {
	got := protocol.EncodeEvent(protocol.NoAck, protocol.EventToolCancel, json.RawMessage(`{"correlation_id":"c1","reason":"timeout"}`))
	const want = `42["tool_cancel",{"correlation_id":"c1","reason":"timeout"}]`
	if string(got) != want {
		t.Errorf("EncodeEvent = %s, want %s", got, want)
	}
}

func TestEncodeEventWithAckIDPutsItBeforePayload(t *testing.T) {
	got := protocol.EncodeEvent(12, "foo")
	if string(got) != `4212["foo"]` {
		t.Errorf("EncodeEvent = %s, want %s", got, `4212["foo"]`)
	}
}

// A nil json.RawMessage marshals as null in encoding/json; EncodeEvent must
// not turn it into an empty array slot, which no peer can parse.
func TestEncodeEventEncodesEmptyArgAsNull(t *testing.T) {
	got := protocol.EncodeEvent(1, "x", nil, json.RawMessage{})
	if string(got) != `421["x",null,null]` {
		t.Fatalf("EncodeEvent = %s, want %s", got, `421["x",null,null]`)
	}
	e, _ := protocol.DecodeEIO(got)
	if _, err := protocol.DecodeSIO(e.Data); err != nil {
		t.Errorf("DecodeSIO of EncodeEvent output: %v", err)
	}
}

func TestEncodeAckWithoutArgsSendsEmptyArray(t *testing.T) {
	if got := protocol.EncodeAck(12); string(got) != `4312[]` {
		t.Errorf("EncodeAck(12) = %s, want %s", got, `4312[]`)
	}
	if got := protocol.EncodeAck(0); string(got) != `430[]` {
		t.Errorf("EncodeAck(0) = %s, want %s", got, `430[]`)
	}
}

func TestEncodeAckEncodesEmptyArgAsNull(t *testing.T) {
	if got := protocol.EncodeAck(3, nil, json.RawMessage(`1`)); string(got) != `433[null,1]` {
		t.Errorf("EncodeAck = %s, want %s", got, `433[null,1]`)
	}
}

func TestEncodeAckRoundTripsArgs(t *testing.T) {
	args := []json.RawMessage{
		json.RawMessage(`{"correlation_id":"c-ü","success":true,"result":{"lines":["a\u0000b","🎉"]}}`),
		json.RawMessage(`"second"`),
	}
	for _, id := range []int64{0, 1, 99999, largestAckID} {
		frame := protocol.EncodeAck(id, args...)
		e, err := protocol.DecodeEIO(frame)
		if err != nil {
			t.Fatalf("DecodeEIO: %v", err)
		}
		p, err := protocol.DecodeSIO(e.Data)
		if err != nil {
			t.Fatalf("DecodeSIO(%q): %v", e.Data, err)
		}
		if p.Type != protocol.SIOAck || p.ID != id || p.Namespace != "/" {
			t.Errorf("got %v id %d ns %q, want ACK %d /", p.Type, p.ID, p.Namespace, id)
		}
		got, err := p.Args()
		if err != nil || len(got) != 2 || !bytes.Equal(got[0], args[0]) || !bytes.Equal(got[1], args[1]) {
			t.Errorf("Args = %s, %v; want %s", got, err, args)
		}
	}
}

func TestSIOTypeStringNamesEveryType(t *testing.T) {
	for typ, want := range map[protocol.SIOType]string{
		protocol.SIOConnect: "CONNECT", protocol.SIODisconnect: "DISCONNECT", protocol.SIOEvent: "EVENT",
		protocol.SIOAck: "ACK", protocol.SIOConnectError: "CONNECT_ERROR",
		protocol.SIOBinaryEvent: "BINARY_EVENT", protocol.SIOBinaryAck: "BINARY_ACK",
		protocol.SIOType('9'): `sio('9')`,
	} {
		if got := typ.String(); got != want {
			t.Errorf("SIOType(%q).String() = %q, want %q", byte(typ), got, want)
		}
	}
}

// Validation: every rejection wraps ErrMalformed.

func assertSIORejected(t *testing.T, wires ...string) {
	t.Helper()
	for _, wire := range wires {
		p, err := protocol.DecodeSIO([]byte(wire))
		if err == nil {
			t.Errorf("DecodeSIO(%q) = %+v, want an error", wire, p)
			continue
		}
		if !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodeSIO(%q) error %v does not wrap ErrMalformed", wire, err)
		}
	}
}

func TestDecodeSIORejectsEmptyPacket(t *testing.T) {
	assertSIORejected(t, "")
}

func TestDecodeSIORejectsUnknownType(t *testing.T) {
	assertSIORejected(t, `7["a"]`, `8`, `9`, `a`, `/admin,`, `["a"]`, " 2[\"a\"]", "\x00", "\xff")
}

func TestDecodeSIORejectsEventWithoutArray(t *testing.T) {
	assertSIORejected(t, `2`, `2/admin,`, `21`, `2{"a":1}`, `2"foo"`, `2null`, `212`, `51-`, `51-{"_placeholder":true,"num":0}`)
}

func TestDecodeSIORejectsEventWithEmptyArray(t *testing.T) {
	assertSIORejected(t, `2[]`, `2/admin,1[]`, `2[ ]`, `50-[]`)
}

func TestDecodeSIORejectsEventWithNonStringName(t *testing.T) {
	assertSIORejected(t, `2[1]`, `2[null]`, `2[ null ,"a"]`, `2[true]`, `2[{}]`, `2[["a"]]`, `21[1.5,"a"]`,
		`51-[null,{"_placeholder":true,"num":0}]`)
}

func TestDecodeSIORejectsAckWithNonArray(t *testing.T) {
	assertSIORejected(t, `3`, `31`, `3/admin,1`, `31{}`, `31"bar"`, `31null`, `61-1{"_placeholder":true,"num":0}`)
}

func TestDecodeSIORejectsDisconnectWithPayload(t *testing.T) {
	assertSIORejected(t, `1{}`, `1[]`, `1"bye"`, `1/admin,{}`, `1 `, `1/admin,1[]`)
}

func TestDecodeSIORejectsConnectWithNonObject(t *testing.T) {
	assertSIORejected(t, `0[]`, `0"x"`, `0null`, `0/admin,["a"]`, `0 `, `0/admin,true`)
}

func TestDecodeSIORejectsConnectErrorWithoutObjectOrString(t *testing.T) {
	assertSIORejected(t, `4`, `4[]`, `4null`, `4/admin,`)
}

func TestDecodeSIORejectsInvalidJSON(t *testing.T) {
	assertSIORejected(t,
		`2["a"`, `2["a"]x`, `2["a"]]`, `2['a']`, `3[1,]`, `31[,]`,
		`0{`, `0{"a":}`, `0{"sid":"x"}{}`, `4{"message":"x"`, `4"unterminated`,
		`51-["a",{"_placeholder":true,"num":0]`)
}

func TestDecodeSIORejectsBinaryPacketWithoutAttachmentCount(t *testing.T) {
	assertSIORejected(t, `5["a"]`, `51["a"]`, `5-["a"]`, `6[]`, `61[]`, `6/admin,1[]`, `5`, `51`, `5x-["a"]`)
}

func TestDecodeSIORejectsOverflowingAckID(t *testing.T) {
	assertSIORejected(t,
		`2`+strconv.FormatInt(largestAckID+1, 10)+`["a"]`,
		`29223372036854775807["a"]`,
		`29223372036854775808["a"]`,
		`3/admin,99999999999999999999999999[]`,
		`0123456789012345678901234567890`)
}

func TestDecodeSIORejectsOverflowingAttachmentCount(t *testing.T) {
	assertSIORejected(t,
		`5`+strconv.FormatInt(largestAckID+1, 10)+`-["a"]`,
		`59223372036854775808-["a"]`,
		`6999999999999999999999999-[]`)
}

func TestEncodeEventQuotesNamesAsJSONMarshalDoes(t *testing.T) {
	for _, name := range []string{"tool_call", "<script>&", "\u2028", "\x00\x1f", "é", "\xff"} {
		quoted, _ := json.Marshal(name)
		want := `42[` + string(quoted) + `]`
		if got := protocol.EncodeEvent(protocol.NoAck, name); string(got) != want {
			t.Errorf("EncodeEvent(%q) = %s, want %s", name, got, want)
		}
	}
}

func TestEncodeToolCallEventIsEncodeEventOfTheCall(t *testing.T) {
	calls := []protocol.ToolCall{
		{CorrelationID: "c1", Endpoint: "/api/ping", Payload: json.RawMessage(`{"n":1}`), Timeout: 9.5},
		{CorrelationID: `q"<&>`, Endpoint: "/é", Payload: json.RawMessage(`{"s":"\u2028 <b>"}`), Timeout: 0.1},
		{CorrelationID: "c3", Endpoint: "/x", Timeout: 30},
	}
	for _, c := range calls {
		for _, id := range []int64{protocol.NoAck, 0, 41, largestAckID} {
			want := protocol.EncodeEvent(id, protocol.EventToolCall, protocol.AppendToolCall(nil, &c))
			if got := protocol.EncodeToolCallEvent(id, &c); !bytes.Equal(got, want) {
				t.Errorf("EncodeToolCallEvent(%d, %+v) = %s, want %s", id, c, got, want)
			}
		}
	}
}
