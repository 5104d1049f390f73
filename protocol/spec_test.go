package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

// The examples below are the ones the Socket.IO v5 protocol document
// (github.com/socketio/socket.io-protocol, "Packet encoding" and "Sample
// session") and the Engine.IO v4 protocol document
// (github.com/socketio/engine.io-protocol) give, byte for byte.

// sioSpecExample is one documented Socket.IO packet and the fields it decodes
// to. data is the raw JSON payload, "" when the packet has none.
type sioSpecExample struct {
	wire        string
	typ         protocol.SIOType
	namespace   string
	id          int64
	attachments int
	data        string
}

var sioSpecExamples = []sioSpecExample{
	// Connection to a namespace.
	{`0`, protocol.SIOConnect, "/", protocol.NoAck, 0, ``},
	{`0{"sid":"wZX3oN0bSVIhsaknAAAI"}`, protocol.SIOConnect, "/", protocol.NoAck, 0, `{"sid":"wZX3oN0bSVIhsaknAAAI"}`},
	{`0/admin,`, protocol.SIOConnect, "/admin", protocol.NoAck, 0, ``},
	{`0/admin,{"sid":"oSO0OpakMV_3jnilAAAA"}`, protocol.SIOConnect, "/admin", protocol.NoAck, 0, `{"sid":"oSO0OpakMV_3jnilAAAA"}`},
	{`0/admin,{"token":"123"}`, protocol.SIOConnect, "/admin", protocol.NoAck, 0, `{"token":"123"}`},
	{`0/admin,{"sid":"-G5j-67EZFp-q59rADQM"}`, protocol.SIOConnect, "/admin", protocol.NoAck, 0, `{"sid":"-G5j-67EZFp-q59rADQM"}`},
	{`4{"message":"Not authorized"}`, protocol.SIOConnectError, "/", protocol.NoAck, 0, `{"message":"Not authorized"}`},

	// Sending and receiving data.
	{`2["foo"]`, protocol.SIOEvent, "/", protocol.NoAck, 0, `["foo"]`},
	{`2["hello",1]`, protocol.SIOEvent, "/", protocol.NoAck, 0, `["hello",1]`},
	{`2["hey","Jude"]`, protocol.SIOEvent, "/", protocol.NoAck, 0, `["hey","Jude"]`},
	{`2/admin,["bar"]`, protocol.SIOEvent, "/admin", protocol.NoAck, 0, `["bar"]`},
	{`51-["baz",{"_placeholder":true,"num":0}]`, protocol.SIOBinaryEvent, "/", protocol.NoAck, 1, `["baz",{"_placeholder":true,"num":0}]`},
	{`52-/admin,["baz",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]`, protocol.SIOBinaryEvent, "/admin", protocol.NoAck, 2, `["baz",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]`},

	// Acknowledgement.
	{`212["foo"]`, protocol.SIOEvent, "/", 12, 0, `["foo"]`},
	{`312[]`, protocol.SIOAck, "/", 12, 0, `[]`},
	{`2/admin,13["foo"]`, protocol.SIOEvent, "/admin", 13, 0, `["foo"]`},
	{`3/admin,13["bar"]`, protocol.SIOAck, "/admin", 13, 0, `["bar"]`},
	{`2/admin,456["project:delete",123]`, protocol.SIOEvent, "/admin", 456, 0, `["project:delete",123]`},
	{`3/admin,456[]`, protocol.SIOAck, "/admin", 456, 0, `[]`},
	{`2/admin,1["tellme"]`, protocol.SIOEvent, "/admin", 1, 0, `["tellme"]`},
	{`51-14["foo",{"_placeholder":true,"num":0}]`, protocol.SIOBinaryEvent, "/", 14, 1, `["foo",{"_placeholder":true,"num":0}]`},
	{`314["bar"]`, protocol.SIOAck, "/", 14, 0, `["bar"]`},
	{`215["foo"]`, protocol.SIOEvent, "/", 15, 0, `["foo"]`},
	{`61-15["bar",{"_placeholder":true,"num":0}]`, protocol.SIOBinaryAck, "/", 15, 1, `["bar",{"_placeholder":true,"num":0}]`},
	{`61-/admin,1[{"_placeholder":true,"num":0}]`, protocol.SIOBinaryAck, "/admin", 1, 1, `[{"_placeholder":true,"num":0}]`},
	{`61-/admin,456[{"_placeholder":true,"num":0}]`, protocol.SIOBinaryAck, "/admin", 456, 1, `[{"_placeholder":true,"num":0}]`},

	// Disconnection from a namespace.
	{`1`, protocol.SIODisconnect, "/", protocol.NoAck, 0, ``},
	{`1/admin,`, protocol.SIODisconnect, "/admin", protocol.NoAck, 0, ``},
}

func TestDecodeSIOSpecExamples(t *testing.T) {
	for _, ex := range sioSpecExamples {
		t.Run(ex.wire, func(t *testing.T) {
			p, err := protocol.DecodeSIO([]byte(ex.wire))
			if err != nil {
				t.Fatalf("DecodeSIO(%q): %v", ex.wire, err)
			}
			if p.Type != ex.typ {
				t.Errorf("Type = %v, want %v", p.Type, ex.typ)
			}
			if p.Namespace != ex.namespace {
				t.Errorf("Namespace = %q, want %q", p.Namespace, ex.namespace)
			}
			if p.ID != ex.id {
				t.Errorf("ID = %d, want %d", p.ID, ex.id)
			}
			if p.HasAck() != (ex.id != protocol.NoAck) {
				t.Errorf("HasAck() = %v for ID %d", p.HasAck(), ex.id)
			}
			if p.Attachments != ex.attachments {
				t.Errorf("Attachments = %d, want %d", p.Attachments, ex.attachments)
			}
			if ex.data == "" {
				if p.Data != nil {
					t.Errorf("Data = %q, want nil", p.Data)
				}
			} else if string(p.Data) != ex.data {
				t.Errorf("Data = %s, want %s", p.Data, ex.data)
			}
		})
	}
}

func TestAppendSIOReencodesSpecExamplesExactly(t *testing.T) {
	for _, ex := range sioSpecExamples {
		t.Run(ex.wire, func(t *testing.T) {
			p, err := protocol.DecodeSIO([]byte(ex.wire))
			if err != nil {
				t.Fatalf("DecodeSIO(%q): %v", ex.wire, err)
			}
			if got := protocol.AppendSIO(nil, p); string(got) != ex.wire {
				t.Errorf("AppendSIO = %q, want %q", got, ex.wire)
			}
			if got := protocol.AppendMessage(nil, p); string(got) != "4"+ex.wire {
				t.Errorf("AppendMessage = %q, want %q", got, "4"+ex.wire)
			}
		})
	}
}

func TestAppendSIOEncodesSpecExamplesFromFields(t *testing.T) {
	for _, ex := range sioSpecExamples {
		t.Run(ex.wire, func(t *testing.T) {
			p := protocol.SIOPacket{Type: ex.typ, Namespace: ex.namespace, ID: ex.id, Attachments: ex.attachments}
			if ex.data != "" {
				p.Data = json.RawMessage(ex.data)
			}
			if got := protocol.AppendSIO(nil, p); string(got) != ex.wire {
				t.Errorf("AppendSIO = %q, want %q", got, ex.wire)
			}
		})
	}
}

func TestDecodeSIOSpecEventNames(t *testing.T) {
	for wire, want := range map[string]string{
		`2["foo"]`:                                   "foo",
		`2["hello",1]`:                               "hello",
		`2/admin,456["project:delete",123]`:          "project:delete",
		`51-["baz",{"_placeholder":true,"num":0}]`:   "baz",
		`51-14["foo",{"_placeholder":true,"num":0}]`: "foo",
	} {
		p, err := protocol.DecodeSIO([]byte(wire))
		if err != nil {
			t.Fatalf("DecodeSIO(%q): %v", wire, err)
		}
		name, err := p.EventName()
		if err != nil || name != want {
			t.Errorf("EventName of %q = %q, %v; want %q", wire, name, err, want)
		}
	}
}

func TestBinaryAssemblerSpecExamples(t *testing.T) {
	for _, tc := range []struct {
		header      string
		attachments [][]byte
		wantType    protocol.SIOType
		wantNS      string
		wantID      int64
		wantData    string
	}{
		{`51-["baz",{"_placeholder":true,"num":0}]`, [][]byte{{1, 2, 3, 4}}, protocol.SIOEvent, "/", protocol.NoAck, `["baz","AQIDBA=="]`},
		{`52-/admin,["baz",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]`, [][]byte{{1, 2}, {3, 4}}, protocol.SIOEvent, "/admin", protocol.NoAck, `["baz","AQI=","AwQ="]`},
		{`51-14["foo",{"_placeholder":true,"num":0}]`, [][]byte{{1, 2, 3, 4}}, protocol.SIOEvent, "/", 14, `["foo","AQIDBA=="]`},
		{`61-15["bar",{"_placeholder":true,"num":0}]`, [][]byte{{1, 2, 3, 4}}, protocol.SIOAck, "/", 15, `["bar","AQIDBA=="]`},
		{`61-/admin,456[{"_placeholder":true,"num":0}]`, [][]byte{{0xff, 0x00}}, protocol.SIOAck, "/admin", 456, `["/wA="]`},
	} {
		t.Run(tc.header, func(t *testing.T) {
			h, err := protocol.DecodeSIO([]byte(tc.header))
			if err != nil {
				t.Fatalf("DecodeSIO: %v", err)
			}
			var a protocol.BinaryAssembler
			if a.Start(h) {
				t.Fatal("Start reported done before any attachment")
			}
			for i, att := range tc.attachments {
				done := a.Add(att)
				if last := i == len(tc.attachments)-1; done != last {
					t.Fatalf("Add #%d reported done=%v", i, done)
				}
			}
			p, raw, err := a.Packet()
			if err != nil {
				t.Fatalf("Packet: %v", err)
			}
			if p.Type != tc.wantType || p.Namespace != tc.wantNS || p.ID != tc.wantID || p.Attachments != 0 {
				t.Errorf("packet = %v %q id %d attachments %d; want %v %q id %d attachments 0",
					p.Type, p.Namespace, p.ID, p.Attachments, tc.wantType, tc.wantNS, tc.wantID)
			}
			if string(p.Data) != tc.wantData {
				t.Errorf("Data = %s, want %s", p.Data, tc.wantData)
			}
			if len(raw) != len(tc.attachments) {
				t.Fatalf("got %d raw attachments, want %d", len(raw), len(tc.attachments))
			}
			for i := range raw {
				if !bytes.Equal(raw[i], tc.attachments[i]) {
					t.Errorf("attachment %d = %x, want %x", i, raw[i], tc.attachments[i])
				}
			}
		})
	}
}

func TestDecodeEIOSpecExamples(t *testing.T) {
	for _, tc := range []struct {
		wire string
		typ  protocol.EIOType
		data string
	}{
		{`0{"sid":"lv_VI97HAXpY6yYWAAAC","upgrades":["websocket"],"pingInterval":25000,"pingTimeout":5000,"maxPayload":1000000}`,
			protocol.EIOOpen, `{"sid":"lv_VI97HAXpY6yYWAAAC","upgrades":["websocket"],"pingInterval":25000,"pingTimeout":5000,"maxPayload":1000000}`},
		{`1`, protocol.EIOClose, ``},
		{`2`, protocol.EIOPing, ``},
		{`3`, protocol.EIOPong, ``},
		{`2probe`, protocol.EIOPing, `probe`},
		{`3probe`, protocol.EIOPong, `probe`},
		{`4hello`, protocol.EIOMessage, `hello`},
		{`4HelloWorld`, protocol.EIOMessage, `HelloWorld`},
		{`4hey`, protocol.EIOMessage, `hey`},
		{`4€€€`, protocol.EIOMessage, `€€€`},
		{`5`, protocol.EIOUpgrade, ``},
		{`6`, protocol.EIONoop, ``},
		{`40`, protocol.EIOMessage, `0`},
		{`40/admin,`, protocol.EIOMessage, `0/admin,`},
		{`42["hello"]`, protocol.EIOMessage, `2["hello"]`},
	} {
		t.Run(tc.wire, func(t *testing.T) {
			p, err := protocol.DecodeEIO([]byte(tc.wire))
			if err != nil {
				t.Fatalf("DecodeEIO(%q): %v", tc.wire, err)
			}
			if p.Type != tc.typ || string(p.Data) != tc.data || p.Binary {
				t.Errorf("DecodeEIO(%q) = {%v %q binary=%v}, want {%v %q binary=false}", tc.wire, p.Type, p.Data, p.Binary, tc.typ, tc.data)
			}
			if got := protocol.AppendEIO(nil, p.Type, p.Data); string(got) != tc.wire {
				t.Errorf("AppendEIO = %q, want %q", got, tc.wire)
			}
		})
	}
}

func TestDecodeOpenSpecExample(t *testing.T) {
	const frame = `0{"sid":"lv_VI97HAXpY6yYWAAAC","upgrades":["websocket"],"pingInterval":25000,"pingTimeout":5000,"maxPayload":1000000}`
	p, err := protocol.DecodeEIO([]byte(frame))
	if err != nil || p.Type != protocol.EIOOpen {
		t.Fatalf("DecodeEIO = %v, %v; want an open packet", p.Type, err)
	}
	info, err := protocol.DecodeOpen(p.Data)
	if err != nil {
		t.Fatalf("DecodeOpen: %v", err)
	}
	want := protocol.OpenInfo{SID: "lv_VI97HAXpY6yYWAAAC", Upgrades: []string{"websocket"}, PingInterval: 25000, PingTimeout: 5000, MaxPayload: 1000000}
	if info.SID != want.SID || len(info.Upgrades) != 1 || info.Upgrades[0] != "websocket" ||
		info.PingInterval != want.PingInterval || info.PingTimeout != want.PingTimeout || info.MaxPayload != want.MaxPayload {
		t.Errorf("DecodeOpen = %+v, want %+v", info, want)
	}
	if got := protocol.EncodeOpen(want); string(got) != frame {
		t.Errorf("EncodeOpen = %s, want %s", got, frame)
	}
}

func TestDecodePayloadSpecExamples(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    []string // each packet's type digit and data
	}{
		{"4hello\x1e4world", []string{"4hello", "4world"}},
		{"4hello\x1e4€€€", []string{"4hello", "4€€€"}},
		{"42[\"hello\"]\x1e42[\"world\"]", []string{`42["hello"]`, `42["world"]`}},
		{"4hey", []string{"4hey"}},
		{"6", []string{"6"}},
		{"2\x1e3\x1e6", []string{"2", "3", "6"}},
	} {
		t.Run(tc.payload, func(t *testing.T) {
			ps, err := protocol.DecodePayload([]byte(tc.payload))
			if err != nil {
				t.Fatalf("DecodePayload: %v", err)
			}
			if len(ps) != len(tc.want) {
				t.Fatalf("got %d packets, want %d", len(ps), len(tc.want))
			}
			for i, p := range ps {
				if got := protocol.AppendEIO(nil, p.Type, p.Data); string(got) != tc.want[i] {
					t.Errorf("packet %d = %q, want %q", i, got, tc.want[i])
				}
			}
		})
	}
}

func TestDecodePayloadSpecSampleSessionCarriesSocketIOEvents(t *testing.T) {
	ps, err := protocol.DecodePayload([]byte("42[\"hello\"]\x1e42[\"world\"]"))
	if err != nil {
		t.Fatalf("DecodePayload: %v", err)
	}
	var names []string
	for _, p := range ps {
		if p.Type != protocol.EIOMessage {
			t.Fatalf("packet type %v, want message", p.Type)
		}
		sp, err := protocol.DecodeSIO(p.Data)
		if err != nil {
			t.Fatalf("DecodeSIO(%q): %v", p.Data, err)
		}
		name, err := sp.EventName()
		if err != nil {
			t.Fatalf("EventName: %v", err)
		}
		names = append(names, name)
	}
	if len(names) != 2 || names[0] != "hello" || names[1] != "world" {
		t.Errorf("event names = %q, want [hello world]", names)
	}
}

// Engine.IO v4 sends a binary packet inside a polling payload as 'b' and
// base64; DecodePayload documents that it does not decode those.
func TestDecodePayloadRejectsSpecBase64BinaryPacket(t *testing.T) {
	_, err := protocol.DecodePayload([]byte("4hello\x1ebAQID"))
	if !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("DecodePayload(base64 binary) error = %v, want ErrMalformed", err)
	}
}
