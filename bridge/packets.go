//go:build !windows

package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/tetherdev/tether/protocol"
)

// The bridge-specific meaning of Socket.IO packets the protocol package
// decodes: what a tool_call, tool_cancel, CONNECT answer or DISCONNECT says.
// Everything here parses broker input and must never panic on it.

// decodeToolCall extracts the call from a tool_call event's arguments. On
// failure it still returns the correlation id if it could read one, so the
// error response names the call.
func decodeToolCall(args []json.RawMessage) (protocol.ToolCall, error) {
	var call protocol.ToolCall
	if len(args) < 2 {
		return call, errors.New("tool_call without a body")
	}
	body := args[1]
	if firstByte(body) != '{' {
		return call, errors.New("tool_call body must be an object")
	}
	if err := protocol.DecodeToolCall(body, &call); err != nil {
		var idOnly struct {
			CorrelationID string `json:"correlation_id"`
		}
		_ = json.Unmarshal(body, &idOnly) // best effort, for the error response
		return protocol.ToolCall{CorrelationID: idOnly.CorrelationID}, fmt.Errorf("decoding tool_call: %v", err)
	}
	if call.CorrelationID == "" {
		return call, errors.New("tool_call without correlation_id")
	}
	return call, nil
}

// decodeToolCancel extracts the cancel notice from a tool_cancel event's
// arguments.
func decodeToolCancel(args []json.RawMessage) (protocol.ToolCancel, error) {
	var c protocol.ToolCancel
	if len(args) < 2 || firstByte(args[1]) != '{' {
		return c, errors.New("tool_cancel body must be an object")
	}
	if err := json.Unmarshal(args[1], &c); err != nil {
		return c, fmt.Errorf("decoding tool_cancel: %v", err)
	}
	if c.CorrelationID == "" {
		return c, errors.New("tool_cancel without correlation_id")
	}
	return c, nil
}

// connectError is the broker's refusal of the bridge: a Socket.IO
// CONNECT_ERROR, or an HTTP 401/403 on the WebSocket upgrade.
type connectError struct {
	code    string
	message string
}

func (e *connectError) Error() string {
	if e.code == "" {
		return "broker refused the connection: " + e.message
	}
	return fmt.Sprintf("broker refused the connection: %s: %s", e.code, e.message)
}

// permanent reports whether retrying soon is pointless: the credentials or
// the workspace are wrong and only an operator can fix that.
func (e *connectError) permanent() bool {
	return e.code == protocol.CodeUnauthorized || e.code == protocol.CodeForbidden
}

// decodeConnectError reads a CONNECT_ERROR payload, which socket.io servers
// send as {"message":…,"data":{"code":…}} or, in older versions, as a bare
// string.
func decodeConnectError(data json.RawMessage) *connectError {
	var s string
	if json.Unmarshal(data, &s) == nil {
		return &connectError{message: s}
	}
	var obj struct {
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return &connectError{message: string(data)}
	}
	e := &connectError{message: obj.Message}
	var d struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(obj.Data, &d) == nil {
		e.code = d.Code
	}
	return e
}

// decodeConnectAck returns the sid of a CONNECT answer ({"sid":…}); an
// absent or odd payload yields "" since the bridge only logs it.
func decodeConnectAck(data json.RawMessage) string {
	var ack struct {
		SID string `json:"sid"`
	}
	_ = json.Unmarshal(data, &ack)
	return ack.SID
}

// eventDisconnectReason is the event the tether broker sends just before
// DISCONNECT, {"reason":"replaced"}, since Socket.IO's DISCONNECT carries no
// reason of its own.
const eventDisconnectReason = "disconnect_reason"

// disconnectReason reads the reason of a disconnect_reason event, or of a
// DISCONNECT from a broker that attaches one (not standard Socket.IO, so
// this is lenient): a JSON string, or an object with "reason" (or
// "message"), or nothing.
func disconnectReason(payload []byte) string {
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(payload, &s) == nil {
		return s
	}
	var obj struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	if json.Unmarshal(payload, &obj) == nil {
		if obj.Reason != "" {
			return obj.Reason
		}
		return obj.Message
	}
	return ""
}

// disconnectFrame is Socket.IO DISCONNECT for the default namespace.
var disconnectFrame = []byte{byte(protocol.EIOMessage), byte(protocol.SIODisconnect)}

// connectFrame is the Socket.IO CONNECT packet carrying the bridge's
// credentials, the way socket.io-client sends its auth option.
func connectFrame(token, workspaceID string) []byte {
	auth, _ := json.Marshal(struct {
		Token       string `json:"token"`
		WorkspaceID string `json:"workspace_id"`
	}{token, workspaceID}) // strings always marshal
	return protocol.AppendMessage(nil, protocol.SIOPacket{Type: protocol.SIOConnect, ID: protocol.NoAck, Data: auth})
}

// responseFrame encodes resp as the ack of ackID, or as a tool_response event
// when the call carried no ack id. A frame the broker would refuse as larger
// than its maxPayload is replaced by a payload_too_large failure, so the call
// still gets its one answer.
func responseFrame(ackID int64, resp protocol.ToolResponse, maxPayload int) (frame []byte, replaced bool) {
	frame = encodeResponse(ackID, resp)
	if maxPayload > 0 && len(frame) > maxPayload {
		tooLarge := protocol.Failure(resp.CorrelationID, protocol.CodePayloadTooLarge,
			fmt.Sprintf("response of %d bytes exceeds the broker's maxPayload of %d bytes", len(frame), maxPayload))
		return encodeResponse(ackID, tooLarge), true
	}
	return frame, false
}

// encodeResponse copies resp.Result without parsing it again: a result only
// ever comes from Handle's json.Marshal, which refuses invalid JSON.
func encodeResponse(ackID int64, resp protocol.ToolResponse) []byte {
	body := protocol.AppendToolResponse(make([]byte, 0, 96+len(resp.Result)+len(resp.Message)), &resp)
	if ackID >= 0 {
		return protocol.EncodeAck(ackID, body)
	}
	return protocol.EncodeEvent(protocol.NoAck, protocol.EventToolResponse, body)
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// socketURL turns the broker URL an operator gives (http, https, ws or wss;
// with or without a path; or a bare host:port) into the Engine.IO WebSocket
// endpoint. A path that does not end in /socket.io is taken as the prefix the
// broker is mounted under.
func socketURL(raw string) (string, error) {
	if !strings.Contains(raw, "://") {
		raw = "ws://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parsing broker URL: %w", err)
	}
	switch u.Scheme {
	case "ws", "wss":
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("broker URL %q: scheme must be http, https, ws or wss", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("broker URL %q has no host", raw)
	}
	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, "/socket.io") {
		p += "/socket.io"
	}
	u.Path, u.RawPath = p+"/", ""
	q := u.Query()
	q.Set("EIO", "4")
	q.Set("transport", "websocket")
	u.RawQuery = q.Encode()
	u.Fragment = ""
	return u.String(), nil
}
