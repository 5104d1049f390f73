package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
)

// BinaryAssembler collects the binary frames that follow a BINARY_EVENT or
// BINARY_ACK header. It is not safe for concurrent use; a connection's read
// loop owns one.
type BinaryAssembler struct {
	header  SIOPacket
	buffers [][]byte
	active  bool
}

// Start begins collecting attachments for header. A header without
// attachments is complete at once (Start returns true).
func (a *BinaryAssembler) Start(header SIOPacket) (done bool) {
	a.header = header
	a.header.Data = append(json.RawMessage(nil), header.Data...)
	// A fresh slice, not a.buffers[:0]: Packet hands the previous one to the
	// caller, and reusing its array would overwrite the caller's attachments.
	a.buffers = nil
	a.active = header.Attachments > 0
	return !a.active
}

// Active reports whether the assembler waits for more binary frames.
func (a *BinaryAssembler) Active() bool { return a.active }

// Add appends one binary frame and reports whether all attachments arrived.
func (a *BinaryAssembler) Add(frame []byte) (done bool) {
	a.buffers = append(a.buffers, append([]byte(nil), frame...))
	if len(a.buffers) >= a.header.Attachments {
		a.active = false
		return true
	}
	return false
}

// Packet returns the assembled packet with every placeholder replaced by the
// base64 text of its attachment (JSON has no bytes; tether payloads are JSON),
// and the raw attachments themselves.
func (a *BinaryAssembler) Packet() (SIOPacket, [][]byte, error) {
	p := a.header
	p.args, p.name = nil, "" // parsed from the placeholders; Data changes below
	// UseNumber keeps every number as its JSON text: through float64 an id
	// above 2^53 would come back changed, and 1e400 would not decode at all.
	dec := json.NewDecoder(bytes.NewReader(p.Data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return p, nil, malformed("binary packet payload: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return p, nil, malformed("binary packet payload: data after the JSON value")
	}
	v, err := replacePlaceholders(v, a.buffers)
	if err != nil {
		return p, nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return p, nil, malformed("binary packet payload: %v", err)
	}
	p.Data = data
	if p.Type == SIOBinaryEvent {
		p.Type = SIOEvent
	} else {
		p.Type = SIOAck
	}
	p.Attachments = 0
	return p, a.buffers, nil
}

func replacePlaceholders(v any, bufs [][]byte) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if ph, ok := x["_placeholder"].(bool); ok && ph {
			n, ok := x["num"].(json.Number)
			num, err := n.Float64()
			if !ok || err != nil || num < 0 || num >= float64(len(bufs)) || num != math.Trunc(num) {
				return nil, malformed("binary placeholder refers to no attachment")
			}
			return base64.StdEncoding.EncodeToString(bufs[int(num)]), nil
		}
		for k, e := range x {
			r, err := replacePlaceholders(e, bufs)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	case []any:
		for i, e := range x {
			r, err := replacePlaceholders(e, bufs)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	}
	return v, nil
}
