//go:build !windows

package bridge

// White-box fuzz targets for the bridge's own parsing of broker input (the
// packet codec itself is fuzzed in protocol). They live inside the package
// because these parsers are unexported; everything else is tested black-box.

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/tetherdev/tether/protocol"
)

// FuzzBrokerFrame feeds arbitrary text frames through the same decoding the
// read loop applies, and checks that whatever call it accepts can be
// answered with a frame the broker can decode back to the same call.
func FuzzBrokerFrame(f *testing.F) {
	for _, seed := range []string{
		`42["tool_call",{"correlation_id":"c1","endpoint":"/api/ping","payload":{"a":1},"timeout":5}]`,
		`421["tool_call",{"correlation_id":"c1","endpoint":"/api/ping","timeout":0.5}]`,
		`42["tool_call",{"correlation_id":7}]`,
		`42["tool_call","x"]`,
		`42["tool_cancel",{"correlation_id":"c1","reason":"timeout"}]`,
		`44{"message":"no","data":{"code":"unauthorized"}}`,
		`44"bad"`,
		`40{"sid":"s"}`,
		`41`,
		`41{"reason":"replaced"}`,
		`41"replaced"`,
		`2probe`,
		`451-["tool_call",{"_placeholder":true,"num":0}]`,
		"42[\"tool_call\",{\"correlation_id\":\"\u2028\",\"endpoint\":\"/\"}]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, frame string) {
		pkt, err := protocol.DecodeEIO([]byte(frame))
		if err != nil || pkt.Type != protocol.EIOMessage {
			return
		}
		data := pkt.Data
		if len(data) > 0 && protocol.SIOType(data[0]) == protocol.SIODisconnect {
			_ = serverDisconnect(disconnectReason(data[1:]))
		}
		p, err := protocol.DecodeSIO(data)
		if err != nil {
			return
		}
		switch p.Type {
		case protocol.SIOConnect:
			_ = decodeConnectAck(p.Data)
		case protocol.SIOConnectError:
			if e := decodeConnectError(p.Data); e == nil || e.Error() == "" {
				t.Fatalf("no error for CONNECT_ERROR %q", frame)
			}
		case protocol.SIOEvent:
			args, err := p.Args()
			if err != nil {
				return
			}
			_, _ = decodeToolCancel(args)
			call, err := decodeToolCall(args)
			if err == nil && call.CorrelationID == "" {
				t.Fatalf("accepted a call without correlation id from %q", frame)
			}
			_, _ = precheck(&call)
			checkAnswerable(t, p.ID, call)
		}
	})
}

// checkAnswerable encodes a response to call and decodes it as the broker
// would.
func checkAnswerable(t *testing.T, ackID int64, call protocol.ToolCall) {
	resp := protocol.Success(call.CorrelationID, call.Payload)
	if len(resp.Result) == 0 || !json.Valid(resp.Result) {
		resp = protocol.Failure(call.CorrelationID, protocol.CodeInvalidPayload, "x")
	}
	frame, _ := responseFrame(ackID, resp, 0)
	pkt, err := protocol.DecodeEIO(frame)
	if err != nil {
		t.Fatalf("response frame %q: %v", frame, err)
	}
	p, err := protocol.DecodeSIO(pkt.Data)
	if err != nil {
		t.Fatalf("response frame %q: %v", frame, err)
	}
	args, err := p.Args()
	if err != nil || len(args) == 0 {
		t.Fatalf("response frame %q has no arguments", frame)
	}
	if p.Type == protocol.SIOEvent {
		args = args[1:]
	}
	got, ok, err := protocol.DecodeResponse(args[0])
	if err != nil || !ok || got.CorrelationID != call.CorrelationID {
		t.Fatalf("response frame %q decodes to %+v (ok=%v err=%v), want correlation id %q",
			frame, got, ok, err, call.CorrelationID)
	}
	if (ackID >= 0) != (p.Type == protocol.SIOAck) || (ackID >= 0 && p.ID != ackID) {
		t.Fatalf("response frame %q does not answer ack %d", frame, ackID)
	}
}

// FuzzSocketURL checks that every broker URL New accepts becomes an Engine.IO
// WebSocket endpoint.
func FuzzSocketURL(f *testing.F) {
	for _, seed := range []string{
		"http://localhost:8080", "https://broker.example/tether/", "ws://h/socket.io/?EIO=3",
		"h:1", "wss://[::1]:9/x?y=1#frag", "ftp://x", "http://", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := socketURL(raw)
		if err != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("socketURL(%q) = %q, which does not parse: %v", raw, s, err)
		}
		if u.Scheme != "ws" && u.Scheme != "wss" {
			t.Fatalf("socketURL(%q) = %q: scheme %q", raw, s, u.Scheme)
		}
		if !strings.HasSuffix(u.Path, "/socket.io/") {
			t.Fatalf("socketURL(%q) = %q: path %q", raw, s, u.Path)
		}
		if q := u.Query(); q.Get("EIO") != "4" || q.Get("transport") != "websocket" {
			t.Fatalf("socketURL(%q) = %q: query %q", raw, s, u.RawQuery)
		}
	})
}
