package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

// assemble runs header and frames through a fresh BinaryAssembler.
func assemble(t *testing.T, header string, frames ...[]byte) (protocol.SIOPacket, [][]byte, error) {
	t.Helper()
	h := mustDecodeSIO(t, header)
	var a protocol.BinaryAssembler
	done := a.Start(h)
	for _, f := range frames {
		done = a.Add(f)
	}
	if !done {
		t.Fatalf("%q: assembler not done after %d frames", header, len(frames))
	}
	return a.Packet()
}

func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("result %s is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s is not JSON: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

func TestBinaryAssemblerReplacesNestedPlaceholdersWithBase64(t *testing.T) {
	const header = `52-7["upload",{"meta":{"files":[{"name":"a.bin","data":{"_placeholder":true,"num":1}}]},` +
		`"first":{"_placeholder":true,"num":0},"list":[[{"_placeholder":true,"num":0}]]}]`
	p, _, err := assemble(t, header, []byte("hi"), []byte{0, 1, 2})
	if err != nil {
		t.Fatalf("Packet: %v", err)
	}
	const want = `["upload",{"meta":{"files":[{"name":"a.bin","data":"AAEC"}]},"first":"aGk=","list":[["aGk="]]}]`
	if !jsonEqual(t, p.Data, want) {
		t.Errorf("Data = %s, want %s", p.Data, want)
	}
	if p.Type != protocol.SIOEvent || p.ID != 7 || p.Attachments != 0 {
		t.Errorf("got type %v id %d attachments %d, want EVENT 7 0", p.Type, p.ID, p.Attachments)
	}
}

func TestBinaryAssemblerEncodesEmptyAttachmentAsEmptyString(t *testing.T) {
	p, raw, err := assemble(t, `51-["e",{"_placeholder":true,"num":0}]`, []byte{})
	if err != nil {
		t.Fatalf("Packet: %v", err)
	}
	if string(p.Data) != `["e",""]` || len(raw) != 1 || len(raw[0]) != 0 {
		t.Errorf("Data = %s, raw = %q; want [\"e\",\"\"] and one empty attachment", p.Data, raw)
	}
}

func TestBinaryAssemblerLeavesNonPlaceholderObjectsAlone(t *testing.T) {
	const header = `51-["e",{"_placeholder":false,"num":0},{"_placeholder":"true","num":0},{"num":0},{"_placeholder":true,"num":0}]`
	p, _, err := assemble(t, header, []byte{0xff})
	if err != nil {
		t.Fatalf("Packet: %v", err)
	}
	const want = `["e",{"_placeholder":false,"num":0},{"_placeholder":"true","num":0},{"num":0},"/w=="]`
	if !jsonEqual(t, p.Data, want) {
		t.Errorf("Data = %s, want %s", p.Data, want)
	}
}

// Replacing placeholders re-encodes the whole payload; every other number in
// it (64-bit ids above 2^53, say) must come through digit for digit.
func TestBinaryAssemblerKeepsLargeIntegersExact(t *testing.T) {
	const header = `51-["e",{"id":12345678901234567890,"big":9007199254740993,"f":0.1,"neg":-5},{"_placeholder":true,"num":0}]`
	p, _, err := assemble(t, header, []byte{1})
	if err != nil {
		t.Fatalf("Packet: %v", err)
	}
	for _, want := range []string{`12345678901234567890`, `9007199254740993`, `0.1`, `-5`} {
		if !bytes.Contains(p.Data, []byte(want)) {
			t.Errorf("Data = %s, lost the number %s", p.Data, want)
		}
	}
}

// 1e400 is valid JSON that does not fit a float64; DecodeSIO accepts it, so
// the assembler must not turn the packet into an error.
func TestBinaryAssemblerAcceptsNumbersBeyondFloat64(t *testing.T) {
	p, _, err := assemble(t, `51-["e",1e400,{"_placeholder":true,"num":0}]`, []byte{1})
	if err != nil {
		t.Fatalf("Packet: %v", err)
	}
	if string(p.Data) != `["e",1e400,"AQ=="]` {
		t.Errorf("Data = %s, want %s", p.Data, `["e",1e400,"AQ=="]`)
	}
}

func TestBinaryAssemblerTurnsBinaryAckIntoAck(t *testing.T) {
	p, raw, err := assemble(t, `61-/admin,456[{"_placeholder":true,"num":0}]`, []byte("x"))
	if err != nil {
		t.Fatalf("Packet: %v", err)
	}
	if p.Type != protocol.SIOAck || p.Namespace != "/admin" || p.ID != 456 || p.Attachments != 0 || string(p.Data) != `["eA=="]` {
		t.Errorf("got %+v (data %s), want ACK /admin 456 [\"eA==\"]", p, p.Data)
	}
	if len(raw) != 1 || string(raw[0]) != "x" {
		t.Errorf("raw attachments = %q, want [x]", raw)
	}
}

func TestBinaryAssemblerWithoutAttachmentsIsDoneAtStart(t *testing.T) {
	h := mustDecodeSIO(t, `50-3["plain",{"a":1}]`)
	var a protocol.BinaryAssembler
	if !a.Start(h) {
		t.Fatal("Start of a header without attachments reported not done")
	}
	if a.Active() {
		t.Fatal("Active after a header without attachments")
	}
	p, raw, err := a.Packet()
	if err != nil {
		t.Fatalf("Packet: %v", err)
	}
	if p.Type != protocol.SIOEvent || p.ID != 3 || !jsonEqual(t, p.Data, `["plain",{"a":1}]`) || len(raw) != 0 {
		t.Errorf("got %+v data %s raw %q", p, p.Data, raw)
	}
}

func TestBinaryAssemblerWaitsForEveryAttachment(t *testing.T) {
	h := mustDecodeSIO(t, `53-["e",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1},{"_placeholder":true,"num":2}]`)
	var a protocol.BinaryAssembler
	if a.Start(h) || !a.Active() {
		t.Fatal("assembler done before any attachment")
	}
	for i := range 2 {
		if a.Add([]byte{byte(i)}) || !a.Active() {
			t.Fatalf("assembler done after %d of 3 attachments", i+1)
		}
	}
	if !a.Add([]byte{2}) || a.Active() {
		t.Fatal("assembler not done after 3 of 3 attachments")
	}
	p, _, err := a.Packet()
	if err != nil || string(p.Data) != `["e","AA==","AQ==","Ag=="]` {
		t.Errorf("Packet = %s, %v", p.Data, err)
	}
}

func TestBinaryAssemblerRejectsPlaceholderOutOfRange(t *testing.T) {
	for _, header := range []string{
		`51-["e",{"_placeholder":true,"num":1}]`,
		`51-["e",{"_placeholder":true,"num":-1}]`,
		`51-["e",{"_placeholder":true,"num":0.5}]`,
		`51-["e",{"_placeholder":true,"num":1e300}]`,
		`51-["e",{"_placeholder":true,"num":"0"}]`,
		`51-["e",{"_placeholder":true,"num":null}]`,
		`51-["e",{"_placeholder":true}]`,
		`51-["e",{"deep":[{"_placeholder":true,"num":9}]}]`,
	} {
		_, _, err := assemble(t, header, []byte("a"))
		if !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("%s: Packet error = %v, want ErrMalformed", header, err)
		}
	}
}

// The header announces fewer attachments than its placeholders refer to.
func TestBinaryAssemblerRejectsMorePlaceholdersThanAttachments(t *testing.T) {
	_, _, err := assemble(t, `51-["e",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]`, []byte("a"))
	if !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("Packet error = %v, want ErrMalformed", err)
	}
}

func TestBinaryAssemblerRejectsPlaceholderWithoutAttachments(t *testing.T) {
	_, _, err := assemble(t, `50-["e",{"_placeholder":true,"num":0}]`)
	if !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("Packet error = %v, want ErrMalformed", err)
	}
}

func TestBinaryAssemblerRejectsHeaderThatIsNotJSON(t *testing.T) {
	var a protocol.BinaryAssembler
	a.Start(protocol.SIOPacket{Type: protocol.SIOBinaryEvent, Attachments: 1, Data: json.RawMessage(`["e",`)})
	a.Add([]byte("a"))
	if _, _, err := a.Packet(); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("Packet error = %v, want ErrMalformed", err)
	}
}

// DecodeSIO's Data and a WebSocket library's read buffer are both reused; the
// assembler must own what it keeps.
func TestBinaryAssemblerCopiesHeaderAndFrames(t *testing.T) {
	wire := []byte(`51-["e",{"_placeholder":true,"num":0}]`)
	h, err := protocol.DecodeSIO(wire)
	if err != nil {
		t.Fatal(err)
	}
	var a protocol.BinaryAssembler
	a.Start(h)
	for i := range wire {
		wire[i] = ' '
	}
	frame := []byte{1, 2, 3}
	a.Add(frame)
	frame[0] = 9
	p, raw, err := a.Packet()
	if err != nil {
		t.Fatalf("Packet: %v", err)
	}
	if string(p.Data) != `["e","AQID"]` || !bytes.Equal(raw[0], []byte{1, 2, 3}) {
		t.Errorf("Data = %s, raw = %x; want [\"e\",\"AQID\"] and 010203", p.Data, raw[0])
	}
}

// The attachments Packet returns belong to the caller, who may hand them to
// another goroutine; the next binary packet must not overwrite them.
func TestBinaryAssemblerAttachmentsSurviveNextPacket(t *testing.T) {
	var a protocol.BinaryAssembler
	a.Start(mustDecodeSIO(t, `52-["e",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]`))
	a.Add([]byte("first-0"))
	a.Add([]byte("first-1"))
	_, first, err := a.Packet()
	if err != nil {
		t.Fatal(err)
	}
	a.Start(mustDecodeSIO(t, `52-["e",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]`))
	a.Add([]byte("second-0"))
	a.Add([]byte("second-1"))
	if _, _, err := a.Packet(); err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || string(first[0]) != "first-0" || string(first[1]) != "first-1" {
		t.Errorf("first packet's attachments became %q", first)
	}
}

func TestBinaryAssemblerIsReusable(t *testing.T) {
	var a protocol.BinaryAssembler
	for i, tc := range []struct {
		header string
		frame  string
		want   string
	}{
		{`51-["a",{"_placeholder":true,"num":0}]`, "x", `["a","eA=="]`},
		{`61-5[{"_placeholder":true,"num":0}]`, "yy", `["eXk="]`},
		{`51-/n,["c",{"_placeholder":true,"num":0}]`, "zzz", `["c","enp6"]`},
	} {
		a.Start(mustDecodeSIO(t, tc.header))
		if !a.Add([]byte(tc.frame)) {
			t.Fatalf("packet %d not done", i)
		}
		p, raw, err := a.Packet()
		if err != nil || string(p.Data) != tc.want || len(raw) != 1 || string(raw[0]) != tc.frame {
			t.Errorf("packet %d = %s, %q, %v; want %s, [%s]", i, p.Data, raw, err, tc.want, tc.frame)
		}
	}
}

func TestBinaryAssemblerRejectsDataAfterPayload(t *testing.T) {
	for _, data := range []string{`["e"] x`, `["e"]]`, "[\"e\"]\x00", `["e"]["f"]`} {
		var a protocol.BinaryAssembler
		a.Start(protocol.SIOPacket{Type: protocol.SIOBinaryEvent, Data: json.RawMessage(data)})
		if _, _, err := a.Packet(); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("Packet(%q) error = %v, want ErrMalformed", data, err)
		}
	}
}
