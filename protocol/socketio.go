package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// SIOType is a Socket.IO v5 packet type, sent as one ASCII digit inside an
// Engine.IO message packet.
type SIOType byte

// Socket.IO v5 packet types.
const (
	SIOConnect      SIOType = '0'
	SIODisconnect   SIOType = '1'
	SIOEvent        SIOType = '2'
	SIOAck          SIOType = '3'
	SIOConnectError SIOType = '4'
	SIOBinaryEvent  SIOType = '5'
	SIOBinaryAck    SIOType = '6'
)

func (t SIOType) String() string {
	switch t {
	case SIOConnect:
		return "CONNECT"
	case SIODisconnect:
		return "DISCONNECT"
	case SIOEvent:
		return "EVENT"
	case SIOAck:
		return "ACK"
	case SIOConnectError:
		return "CONNECT_ERROR"
	case SIOBinaryEvent:
		return "BINARY_EVENT"
	case SIOBinaryAck:
		return "BINARY_ACK"
	}
	return fmt.Sprintf("sio(%q)", byte(t))
}

// NoAck marks a packet that carries no ack id.
const NoAck int64 = -1

// maxAckID bounds ack ids and attachment counts so that a hostile digit run
// cannot overflow; socket.io-client never comes near it.
const maxAckID = 1<<53 - 1

// SIOPacket is one Socket.IO v5 packet. Namespace is "/" when the wire omits
// it. ID is NoAck when the packet carries no ack id. Data is the raw JSON
// payload (nil when absent). For binary packets Attachments counts the binary
// frames that follow, and Data holds {"_placeholder":true,"num":N} objects
// where they belong (see BinaryAssembler).
type SIOPacket struct {
	Type        SIOType
	Namespace   string
	ID          int64
	Attachments int
	Data        json.RawMessage

	// args and name cache what DecodeSIO parsed of an EVENT or ACK, so
	// the hot path reads the array once. Only DecodeSIO sets them.
	args []json.RawMessage
	name string
}

// HasAck reports whether the packet carries an ack id.
func (p *SIOPacket) HasAck() bool { return p.ID >= 0 }

// DecodeSIO parses the data of an Engine.IO message packet as a Socket.IO
// packet and validates the payload's shape for its type, the way
// socket.io-parser does. The returned Data aliases b.
func DecodeSIO(b []byte) (SIOPacket, error) {
	p := SIOPacket{Namespace: "/", ID: NoAck}
	if len(b) == 0 {
		return p, malformed("empty socket.io packet")
	}
	p.Type = SIOType(b[0])
	if p.Type < SIOConnect || p.Type > SIOBinaryAck {
		return p, malformed("unknown socket.io packet type %q", b[0])
	}
	i := 1
	if p.Type == SIOBinaryEvent || p.Type == SIOBinaryAck {
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		if j == i || j >= len(b) || b[j] != '-' {
			return p, malformed("binary packet without attachment count")
		}
		n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
		if err != nil || n > maxAckID {
			return p, malformed("attachment count out of range")
		}
		p.Attachments = int(n)
		i = j + 1
	}
	if i < len(b) && b[i] == '/' {
		j := bytes.IndexByte(b[i:], ',')
		if j < 0 {
			p.Namespace = string(b[i:])
			i = len(b)
		} else {
			p.Namespace = string(b[i : i+j])
			i += j + 1
		}
	}
	if i < len(b) && b[i] >= '0' && b[i] <= '9' {
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		id, err := strconv.ParseInt(string(b[i:j]), 10, 64)
		if err != nil || id > maxAckID {
			return p, malformed("ack id out of range")
		}
		p.ID = id
		i = j
	}
	if i < len(b) {
		p.Data = json.RawMessage(b[i:])
	}
	if err := validatePayload(&p); err != nil {
		return p, err
	}
	return p, nil
}

func validatePayload(p *SIOPacket) error {
	switch p.Type {
	case SIOConnect:
		if p.Data != nil && firstNonSpace(p.Data) != '{' {
			return malformed("CONNECT payload must be an object")
		}
	case SIODisconnect:
		if p.Data != nil {
			return malformed("DISCONNECT carries no payload")
		}
	case SIOConnectError:
		if c := firstNonSpace(p.Data); c != '{' && c != '"' {
			return malformed("CONNECT_ERROR payload must be an object or a string")
		}
	case SIOAck, SIOBinaryAck:
		if firstNonSpace(p.Data) != '[' {
			return malformed("ACK payload must be an array")
		}
		return p.parseArgs() // validates the JSON too
	case SIOEvent, SIOBinaryEvent:
		if firstNonSpace(p.Data) != '[' {
			return malformed("EVENT payload must be an array")
		}
		if err := p.parseArgs(); err != nil {
			return err
		}
		name, err := eventName(p.args)
		if err != nil {
			return err
		}
		p.name = name
		return nil
	}
	if p.Data != nil && !Valid(p.Data) {
		return malformed("payload is not valid JSON")
	}
	return nil
}

func (p *SIOPacket) parseArgs() error {
	args, err := SplitArray(p.Data)
	if err != nil {
		return malformed("payload is not a JSON array: %v", err)
	}
	p.args = args // never nil, so Args knows it is set
	return nil
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// EventName returns the name of an EVENT packet (the first array element).
func (p *SIOPacket) EventName() (string, error) {
	if p.name != "" {
		return p.name, nil
	}
	args, err := p.Args()
	if err != nil {
		return "", err
	}
	return eventName(args)
}

func eventName(args []json.RawMessage) (string, error) {
	if len(args) == 0 {
		return "", malformed("EVENT without a name")
	}
	// json.Unmarshal accepts null into a string; a null name is not a name.
	tok := args[0]
	if firstNonSpace(tok) != '"' {
		return "", malformed("EVENT name must be a string")
	}
	// The names the broker dispatches on cost no allocation.
	switch string(tok) {
	case `"` + EventToolCall + `"`:
		return EventToolCall, nil
	case `"` + EventToolResponse + `"`:
		return EventToolResponse, nil
	case `"` + EventToolCancel + `"`:
		return EventToolCancel, nil
	}
	// Args come from SplitArray, so tok is one checked string token; this
	// scan only finds out whether it needs unescaping.
	end, escaped, nonASCII, err := scanString(tok, 0)
	if err != nil || end != len(tok) {
		return "", malformed("EVENT name must be a string")
	}
	name, err := unquote(tok, escaped, nonASCII)
	if err != nil {
		return "", malformed("EVENT name must be a string")
	}
	return name, nil
}

// Args splits an EVENT or ACK payload into its array elements. For an EVENT
// the first element is the event name. The elements alias Data.
func (p *SIOPacket) Args() ([]json.RawMessage, error) {
	if p.args != nil {
		return p.args, nil
	}
	args, err := SplitArray(p.Data)
	if err != nil {
		return nil, malformed("payload is not an array: %v", err)
	}
	return args, nil
}

// AppendSIO appends the Socket.IO encoding of p to dst (without the Engine.IO
// message prefix; see AppendMessage).
func AppendSIO(dst []byte, p SIOPacket) []byte {
	dst = append(dst, byte(p.Type))
	if p.Type == SIOBinaryEvent || p.Type == SIOBinaryAck {
		dst = strconv.AppendInt(dst, int64(p.Attachments), 10)
		dst = append(dst, '-')
	}
	if p.Namespace != "" && p.Namespace != "/" {
		dst = append(dst, p.Namespace...)
		dst = append(dst, ',')
	}
	if p.ID >= 0 {
		dst = strconv.AppendInt(dst, p.ID, 10)
	}
	return append(dst, p.Data...)
}

// AppendMessage appends the full text frame ("4" + Socket.IO packet) of p.
func AppendMessage(dst []byte, p SIOPacket) []byte {
	return AppendSIO(append(dst, byte(EIOMessage)), p)
}

// EncodeEvent returns the text frame of an EVENT named name with the given
// JSON arguments, carrying ack id id (or NoAck) in the default namespace.
func EncodeEvent(id int64, name string, args ...json.RawMessage) []byte {
	n := eventHeadLen + len(name)
	for _, a := range args {
		n += 1 + max(len(a), len("null"))
	}
	dst := appendEventHead(make([]byte, 0, n), id, name)
	for _, a := range args {
		dst = append(dst, ',')
		dst = appendArg(dst, a)
	}
	return append(dst, ']')
}

// EncodeToolCallEvent returns the text frame of a tool_call EVENT carrying
// ack id id and c, as EncodeEvent(id, EventToolCall, AppendToolCall(nil, c))
// would, in one allocation.
func EncodeToolCallEvent(id int64, c *ToolCall) []byte {
	n := eventHeadLen + len(EventToolCall) + 96 + len(c.CorrelationID) + len(c.Endpoint) + len(c.Payload) + len(c.ReplyTo) + len(c.Traceparent)
	dst := appendEventHead(make([]byte, 0, n), id, EventToolCall)
	dst = append(dst, ',')
	dst = AppendToolCall(dst, c)
	return append(dst, ']')
}

// eventHeadLen bounds what appendEventHead writes besides the quoted name,
// plus the closing bracket: "42", an ack id, "[" and the name's quotes.
const eventHeadLen = 2 + 20 + 1 + 2 + 1

// appendEventHead appends an EVENT frame up to its name: "42", the ack id,
// "[" and name quoted as json.Marshal quotes it.
func appendEventHead(dst []byte, id int64, name string) []byte {
	dst = append(dst, byte(EIOMessage), byte(SIOEvent))
	if id >= 0 {
		dst = strconv.AppendInt(dst, id, 10)
	}
	dst = append(dst, '[')
	return appendString(dst, name)
}

// EncodeAck returns the text frame of an ACK for id with the given arguments.
func EncodeAck(id int64, args ...json.RawMessage) []byte {
	data := make([]byte, 0, 64)
	data = append(data, '[')
	for i, a := range args {
		if i > 0 {
			data = append(data, ',')
		}
		data = appendArg(data, a)
	}
	data = append(data, ']')
	return AppendMessage(make([]byte, 0, len(data)+24), SIOPacket{Type: SIOAck, ID: id, Data: data})
}

// appendArg appends one JSON argument, writing an empty one as null the way
// encoding/json marshals a nil json.RawMessage: an empty array slot ("[a,]")
// is invalid JSON that every peer rejects.
func appendArg(dst []byte, a json.RawMessage) []byte {
	if len(a) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, a...)
}
