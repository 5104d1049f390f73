// Package protocol holds tether's wire format: Engine.IO v4 and Socket.IO v5
// packets, the ToolCall and ToolResponse messages, and every error code.
//
// It knows nothing of sockets, Redis or HTTP: everything here turns bytes into
// values and back, and is safe for concurrent use.
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
)

// EIOType is an Engine.IO v4 packet type, sent as one ASCII digit.
type EIOType byte

// Engine.IO v4 packet types.
const (
	EIOOpen    EIOType = '0'
	EIOClose   EIOType = '1'
	EIOPing    EIOType = '2'
	EIOPong    EIOType = '3'
	EIOMessage EIOType = '4'
	EIOUpgrade EIOType = '5'
	EIONoop    EIOType = '6'
)

func (t EIOType) String() string {
	switch t {
	case EIOOpen:
		return "open"
	case EIOClose:
		return "close"
	case EIOPing:
		return "ping"
	case EIOPong:
		return "pong"
	case EIOMessage:
		return "message"
	case EIOUpgrade:
		return "upgrade"
	case EIONoop:
		return "noop"
	}
	return fmt.Sprintf("eio(%q)", byte(t))
}

// EIOPacket is one Engine.IO packet. Over WebSocket each frame is one packet;
// a binary frame is a message packet whose Data is raw bytes (Binary true).
type EIOPacket struct {
	Type   EIOType
	Data   []byte
	Binary bool
}

// ErrMalformed is wrapped by every decode error, so callers can tell bad
// input from other failures with errors.Is.
var ErrMalformed = errors.New("malformed packet")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// DecodeEIO parses one text WebSocket frame as an Engine.IO packet. The
// returned Data aliases frame.
func DecodeEIO(frame []byte) (EIOPacket, error) {
	if len(frame) == 0 {
		return EIOPacket{}, malformed("empty engine.io packet")
	}
	t := EIOType(frame[0])
	if t < EIOOpen || t > EIONoop {
		return EIOPacket{}, malformed("unknown engine.io packet type %q", frame[0])
	}
	return EIOPacket{Type: t, Data: frame[1:]}, nil
}

// AppendEIO appends the text frame of an Engine.IO packet of type t to dst.
func AppendEIO(dst []byte, t EIOType, data []byte) []byte {
	dst = append(dst, byte(t))
	return append(dst, data...)
}

// PayloadSeparator separates packets in an HTTP long-polling payload (v4).
const PayloadSeparator = 0x1e

// DecodePayload splits an Engine.IO v4 long-polling payload into packets.
// Binary packets travel there as 'b' followed by base64, which is not
// decoded here: such a packet is returned with Type 'b' rejected as malformed.
func DecodePayload(payload []byte) ([]EIOPacket, error) {
	var out []EIOPacket
	start := 0
	for i := 0; i <= len(payload); i++ {
		if i < len(payload) && payload[i] != PayloadSeparator {
			continue
		}
		p, err := DecodeEIO(payload[start:i])
		if err != nil {
			return nil, err
		}
		out = append(out, p)
		start = i + 1
	}
	return out, nil
}

// OpenInfo is the body of the Engine.IO open packet sent by the server.
type OpenInfo struct {
	SID          string   `json:"sid"`
	Upgrades     []string `json:"upgrades"`
	PingInterval int      `json:"pingInterval"`
	PingTimeout  int      `json:"pingTimeout"`
	MaxPayload   int      `json:"maxPayload"`
}

// EncodeOpen returns the text frame of an open packet.
func EncodeOpen(info OpenInfo) []byte {
	if info.Upgrades == nil {
		info.Upgrades = []string{}
	}
	b, _ := json.Marshal(info) // a struct of strings and ints always marshals
	return AppendEIO(make([]byte, 0, len(b)+1), EIOOpen, b)
}

// DecodeOpen parses the data of an open packet.
func DecodeOpen(data []byte) (OpenInfo, error) {
	var info OpenInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return OpenInfo{}, malformed("open packet: %v", err)
	}
	if info.SID == "" {
		return OpenInfo{}, malformed("open packet without sid")
	}
	return info, nil
}
