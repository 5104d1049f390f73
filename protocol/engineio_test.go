package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

var eioTypes = []protocol.EIOType{
	protocol.EIOOpen, protocol.EIOClose, protocol.EIOPing, protocol.EIOPong,
	protocol.EIOMessage, protocol.EIOUpgrade, protocol.EIONoop,
}

func TestEIOPacketRoundTripsEveryType(t *testing.T) {
	for _, typ := range eioTypes {
		for _, data := range []string{"", "probe", `2["a"]`, "€\x1f\x00"} {
			frame := protocol.AppendEIO(nil, typ, []byte(data))
			p, err := protocol.DecodeEIO(frame)
			if err != nil {
				t.Fatalf("DecodeEIO(%q): %v", frame, err)
			}
			if p.Type != typ || string(p.Data) != data || p.Binary {
				t.Errorf("DecodeEIO(%q) = %+v, want type %v data %q", frame, p, typ, data)
			}
		}
	}
}

func TestAppendEIOAppendsToDst(t *testing.T) {
	if got := protocol.AppendEIO([]byte("x"), protocol.EIOPong, []byte("probe")); string(got) != "x3probe" {
		t.Errorf("AppendEIO = %q, want %q", got, "x3probe")
	}
}

func TestDecodeEIODataAliasesFrame(t *testing.T) {
	frame := []byte("4hello")
	p, err := protocol.DecodeEIO(frame)
	if err != nil {
		t.Fatal(err)
	}
	frame[1] = 'j'
	if string(p.Data) != "jello" {
		t.Errorf("Data = %q after changing the frame; DecodeEIO documents that Data aliases it", p.Data)
	}
}

func TestDecodeEIORejectsEmptyFrame(t *testing.T) {
	if _, err := protocol.DecodeEIO(nil); !errors.Is(err, protocol.ErrMalformed) {
		t.Errorf("DecodeEIO(nil) error = %v, want ErrMalformed", err)
	}
	if _, err := protocol.DecodeEIO([]byte{}); !errors.Is(err, protocol.ErrMalformed) {
		t.Errorf("DecodeEIO(empty) error = %v, want ErrMalformed", err)
	}
}

func TestDecodeEIORejectsUnknownType(t *testing.T) {
	for _, frame := range []string{"7", "8hello", "9", "b4AQID", "/", "x", " 4", "\x1e", "\x00", "\xff"} {
		if _, err := protocol.DecodeEIO([]byte(frame)); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodeEIO(%q) error = %v, want ErrMalformed", frame, err)
		}
	}
}

func TestEIOTypeStringNamesEveryType(t *testing.T) {
	want := []string{"open", "close", "ping", "pong", "message", "upgrade", "noop"}
	for i, typ := range eioTypes {
		if got := typ.String(); got != want[i] {
			t.Errorf("EIOType(%q).String() = %q, want %q", byte(typ), got, want[i])
		}
	}
	if got := protocol.EIOType('b').String(); got != `eio('b')` {
		t.Errorf("EIOType('b').String() = %q, want %q", got, `eio('b')`)
	}
}

func TestDecodePayloadKeepsEmptyDataPackets(t *testing.T) {
	ps, err := protocol.DecodePayload([]byte("2\x1e4\x1e6"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].Type != protocol.EIOPing || ps[1].Type != protocol.EIOMessage || ps[2].Type != protocol.EIONoop {
		t.Fatalf("DecodePayload = %+v, want ping, message, noop", ps)
	}
	for i, p := range ps {
		if len(p.Data) != 0 {
			t.Errorf("packet %d Data = %q, want empty", i, p.Data)
		}
	}
}

func TestDecodePayloadRejectsEmptyPacket(t *testing.T) {
	for _, payload := range []string{"", "\x1e", "4a\x1e", "\x1e4a", "4a\x1e\x1e4b"} {
		if ps, err := protocol.DecodePayload([]byte(payload)); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodePayload(%q) = %+v, %v; want ErrMalformed", payload, ps, err)
		}
	}
}

func TestDecodePayloadRejectsUnknownTypeInAnyPacket(t *testing.T) {
	for _, payload := range []string{"7", "4a\x1e9", "9\x1e4a", "4a\x1e4b\x1ex"} {
		if ps, err := protocol.DecodePayload([]byte(payload)); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodePayload(%q) = %+v, %v; want ErrMalformed", payload, ps, err)
		}
	}
}

func TestEncodeOpenRoundTripsThroughDecodeOpen(t *testing.T) {
	in := protocol.OpenInfo{SID: "s-ü/\"x\"", Upgrades: []string{"websocket"}, PingInterval: 25000, PingTimeout: 20000, MaxPayload: 1 << 20}
	frame := protocol.EncodeOpen(in)
	p, err := protocol.DecodeEIO(frame)
	if err != nil || p.Type != protocol.EIOOpen {
		t.Fatalf("DecodeEIO(%q) = %v, %v; want open", frame, p.Type, err)
	}
	out, err := protocol.DecodeOpen(p.Data)
	if err != nil {
		t.Fatalf("DecodeOpen: %v", err)
	}
	if out.SID != in.SID || len(out.Upgrades) != 1 || out.Upgrades[0] != "websocket" ||
		out.PingInterval != in.PingInterval || out.PingTimeout != in.PingTimeout || out.MaxPayload != in.MaxPayload {
		t.Errorf("DecodeOpen = %+v, want %+v", out, in)
	}
}

// A WebSocket-only server offers no upgrades; clients expect [] there, not
// null.
func TestEncodeOpenSendsEmptyUpgradesAsArray(t *testing.T) {
	frame := protocol.EncodeOpen(protocol.OpenInfo{SID: "abc", PingInterval: 1, PingTimeout: 2, MaxPayload: 3})
	const want = `0{"sid":"abc","upgrades":[],"pingInterval":1,"pingTimeout":2,"maxPayload":3}`
	if string(frame) != want {
		t.Errorf("EncodeOpen = %s, want %s", frame, want)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(frame[1:], &m); err != nil || !bytes.Equal(m["upgrades"], []byte("[]")) {
		t.Errorf("upgrades = %s, %v; want []", m["upgrades"], err)
	}
}

func TestDecodeOpenRejectsMissingSID(t *testing.T) {
	for _, data := range []string{`{}`, `{"sid":""}`, `{"upgrades":["websocket"],"pingInterval":25000}`, `null`} {
		if _, err := protocol.DecodeOpen([]byte(data)); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodeOpen(%s) error = %v, want ErrMalformed", data, err)
		}
	}
}

func TestDecodeOpenRejectsInvalidJSON(t *testing.T) {
	for _, data := range []string{``, `{`, `[]`, `"sid"`, `{"sid":1}`, `{"sid":"a","pingInterval":"x"}`, `{"sid":"a"} x`} {
		if _, err := protocol.DecodeOpen([]byte(data)); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodeOpen(%q) error = %v, want ErrMalformed", data, err)
		}
	}
}
